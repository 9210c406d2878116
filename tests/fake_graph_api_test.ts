import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { startFakeGraphApi } from "./support/fake_graph_api.ts";

const TOKEN = "EAAJBtest";
const PHONE_NUMBER_ID = "106540352242922";
const AUTHORIZED = { authorization: `Bearer ${TOKEN}` };

/** A text message body as Parley's sender posts it. */
function textMessage(to: string, body = "Hello"): string {
  return JSON.stringify({
    messaging_product: "whatsapp",
    recipient_type: "individual",
    to,
    type: "text",
    text: { body },
  });
}

/** POSTs `body` to the messages endpoint of `url`. */
function postMessage(url: string, body: string, headers: HeadersInit = AUTHORIZED) {
  return fetch(`${url}/${PHONE_NUMBER_ID}/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
}

Deno.test("startFakeGraphApi() answers sends with unique wamids and records every call", async () => {
  await using graph = await startFakeGraphApi({ accessToken: TOKEN });
  assert.match(graph.url, /^http:\/\/127\.0\.0\.1:\d+\/v21\.0$/);
  const first = await postMessage(graph.url, textMessage("16505551234"));
  const second = await postMessage(graph.url, textMessage("16505551234", "Again"));
  assert.equal(first.status, 200);
  const body = await first.json();
  assert.deepEqual(body.messaging_product, "whatsapp");
  assert.deepEqual(body.contacts, [{ input: "16505551234", wa_id: "16505551234" }]);
  const [{ id: wamid1 }] = body.messages;
  const [{ id: wamid2 }] = (await second.json()).messages;
  assert.match(wamid1, /^wamid\./);
  assert.notEqual(wamid1, wamid2);
  assert.deepEqual(
    graph.calls.map(({ method, path, authorization }) => [method, path, authorization]),
    [
      ["POST", `/v21.0/${PHONE_NUMBER_ID}/messages`, `Bearer ${TOKEN}`],
      ["POST", `/v21.0/${PHONE_NUMBER_ID}/messages`, `Bearer ${TOKEN}`],
    ],
  );
  assert.deepEqual(graph.calls[1].body, JSON.parse(textMessage("16505551234", "Again")));
});

Deno.test("startFakeGraphApi() returns queued answers in order, then succeeds again", async () => {
  await using graph = await startFakeGraphApi();
  const rateLimit = graph.errorBody(130429, "(#130429) Rate limit hit");
  graph.queueMessageResponses(
    { status: 429, body: rateLimit, headers: { "retry-after": "7" } },
    { status: 500, body: graph.errorBody(2, "Service temporarily unavailable") },
  );
  const answers = [];
  for (let i = 0; i < 3; i++) answers.push(await postMessage(graph.url, textMessage("1555"), {}));
  assert.deepEqual(answers.map((answer) => answer.status), [429, 500, 200]);
  assert.equal(answers[0].headers.get("retry-after"), "7");
  const error = (await answers[0].json()).error;
  assert.equal(error.code, 130429);
  assert.equal(error.type, "OAuthException");
  assert.equal(error.message, "(#130429) Rate limit hit");
  assert.equal(typeof error.fbtrace_id, "string");
  assert.equal((await answers[1].json()).error.code, 2);
  assert.match((await answers[2].json()).messages[0].id, /^wamid\./);
});

Deno.test("startFakeGraphApi() rejects a send without messaging_product, to or type with code 100", async () => {
  await using graph = await startFakeGraphApi();
  graph.queueMessageResponses({
    status: 503,
    body: graph.errorBody(131016, "Service unavailable"),
  });
  const valid = JSON.parse(textMessage("1555"));
  for (const name of ["messaging_product", "to", "type"]) {
    const answer = await postMessage(graph.url, JSON.stringify({ ...valid, [name]: undefined }));
    assert.equal(answer.status, 400);
    const { error } = await answer.json();
    assert.equal(error.code, 100);
    assert.match(error.message, new RegExp(name));
  }
  const sms = await postMessage(graph.url, JSON.stringify({ ...valid, messaging_product: "sms" }));
  assert.equal(sms.status, 400);
  await sms.body?.cancel();
  const queued = await postMessage(graph.url, textMessage("1555"));
  assert.equal(queued.status, 503, "a rejected send does not take a queued answer");
  await queued.body?.cancel();
});

Deno.test("startFakeGraphApi() describes media, serves it and expires its URLs", async () => {
  await using graph = await startFakeGraphApi({ accessToken: TOKEN });
  const bytes = new TextEncoder().encode("%PDF-1.7 fake invoice");
  graph.addMedia("2621233374848975", bytes, "application/pdf");

  const lookup = await fetch(`${graph.url}/2621233374848975`, { headers: AUTHORIZED });
  assert.equal(lookup.status, 200);
  const described = await lookup.json();
  assert.deepEqual({ ...described, url: undefined }, {
    messaging_product: "whatsapp",
    url: undefined,
    mime_type: "application/pdf",
    sha256: createHash("sha256").update(bytes).digest("hex"),
    file_size: bytes.length,
    id: "2621233374848975",
  });
  assert.ok(described.url.startsWith(new URL(graph.url).origin));

  const noToken = await fetch(described.url);
  assert.equal(noToken.status, 401);
  assert.equal((await noToken.json()).error.code, 190);
  const file = await fetch(described.url, { headers: AUTHORIZED });
  assert.equal(file.status, 200);
  assert.equal(file.headers.get("content-type"), "application/pdf");
  assert.deepEqual(new Uint8Array(await file.arrayBuffer()), bytes);

  graph.expireMediaUrls();
  const expired = await fetch(described.url, { headers: AUTHORIZED });
  assert.equal(expired.status, 404);
  await expired.body?.cancel();
  const again = await (await fetch(`${graph.url}/2621233374848975`, { headers: AUTHORIZED }))
    .json();
  assert.notEqual(again.url, described.url);
  const fresh = await fetch(again.url, { headers: AUTHORIZED });
  assert.deepEqual(new Uint8Array(await fresh.arrayBuffer()), bytes);

  const unknown = await fetch(`${graph.url}/999`, { headers: AUTHORIZED });
  assert.equal(unknown.status, 400);
  const { error } = await unknown.json();
  assert.deepEqual([error.code, error.error_subcode], [100, 33]);
});

Deno.test("startFakeGraphApi() answers 401 with code 190 without the access token", async () => {
  await using graph = await startFakeGraphApi({ accessToken: TOKEN });
  graph.addMedia("55", new Uint8Array([1, 2, 3]), "image/jpeg");
  const answers = [
    await postMessage(graph.url, textMessage("1555"), {}),
    await postMessage(graph.url, textMessage("1555"), { authorization: "Bearer wrong" }),
    await postMessage(graph.url, textMessage("1555"), { authorization: TOKEN }),
    await fetch(`${graph.url}/55`),
    await fetch(`${graph.url}/55`, { headers: { authorization: "Bearer wrong" } }),
  ];
  for (const answer of answers) {
    assert.equal(answer.status, 401);
    const { error } = await answer.json();
    assert.deepEqual([error.code, error.type], [190, "OAuthException"]);
  }
  assert.equal(graph.calls.length, 5);
  assert.equal(graph.calls[0].authorization, null);
});
