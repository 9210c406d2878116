import assert from "node:assert/strict";
import { type FakeSlack, startFakeSlack } from "../../../tests/support/fake_slack.ts";
import { silentListener } from "../../../tests/support/silent_peer.ts";
import {
  createSlackWebClient,
  encodeSlackParams,
  SlackCallError,
  slackErrorOf,
} from "./web_client.ts";

const APP = { clientId: "123.456", clientSecret: "client-secret", signingSecret: "signing-secret" };
const CHANNEL = "C0SUPPORT";

/** Installs the app into the fake workspace with a tokenless client; answers the bot token. */
async function botToken(slack: FakeSlack): Promise<string> {
  const code = slack.issueCode({ channelId: CHANNEL });
  const access = await createSlackWebClient(undefined, slack.apiUrl).oauth.v2.access({
    client_id: APP.clientId,
    client_secret: APP.clientSecret,
    code,
  });
  return access.access_token!;
}

/** The error `promise` rejects with. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("expected the call to fail");
}

const RATE_LIMITED = { ok: false, error: "ratelimited" };

Deno.test("createSlackWebClient() posts form-encoded to SLACK_API_URL with the Bearer token", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const client = createSlackWebClient(token, slack.apiUrl);
  const blocks = [{ type: "section", text: { type: "mrkdwn", text: "*Hi*" } }];
  const posted = await client.chat.postMessage({ channel: CHANNEL, text: "Hi", blocks });
  assert.equal(posted.ok, true);
  assert.equal(posted.channel, CHANNEL);
  assert.match(posted.ts ?? "", /^\d{10}\.\d{6}$/);
  const call = slack.calls.at(-1)!;
  assert.equal(call.method, "chat.postMessage");
  assert.equal(call.token, token);
  assert.deepEqual(call.params, { channel: CHANNEL, text: "Hi", blocks });
});

Deno.test("createSlackWebClient() waits out a 429's Retry-After and retries by itself", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("chat.postMessage", {
    status: 429,
    headers: { "retry-after": "1" },
    body: RATE_LIMITED,
  });
  const started = performance.now();
  const posted = await client.chat.postMessage({ channel: CHANNEL, text: "After the pause" });
  assert.ok(performance.now() - started >= 1_000, "the client honoured Retry-After: 1");
  assert.equal(posted.ok, true);
  assert.deepEqual(
    slack.calls.filter((call) => call.method === "chat.postMessage").map((call) =>
      call.params.text
    ),
    ["After the pause", "After the pause"],
  );
});

Deno.test("createSlackWebClient() with rejectRateLimited hands a 429 back at once, with its Retry-After", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl, {
    rejectRateLimited: true,
  });
  slack.queue("chat.postMessage", {
    status: 429,
    headers: { "retry-after": "620" },
    body: RATE_LIMITED,
  });
  const started = performance.now();
  const error = await rejection(client.chat.postMessage({ channel: CHANNEL, text: "Later" }));
  assert.ok(performance.now() - started < 5_000, "not waited out");
  assert.deepEqual(slackErrorOf(error), { code: "ratelimited", retryAfterMs: 620_000 });
  assert.equal(slack.calls.filter((call) => call.method === "chat.postMessage").length, 1);
});

Deno.test("slackErrorOf() reads Slack's error code from a refused call", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("chat.postMessage", { body: { ok: false, error: "channel_not_found" } });
  const error = await rejection(client.chat.postMessage({ channel: "C0GONE", text: "Hi" }));
  assert.deepEqual(slackErrorOf(error), { code: "channel_not_found", retryAfterMs: null });
  assert.equal(
    slack.calls.filter((call) => call.method === "chat.postMessage").length,
    1,
    "no retry",
  );
  const stranger = createSlackWebClient("xoxb-not-issued", slack.apiUrl);
  assert.deepEqual(slackErrorOf(await rejection(stranger.auth.test())), {
    code: "invalid_auth",
    retryAfterMs: null,
  });
});

Deno.test("slackErrorOf() is ratelimited with Retry-After once the client's retries run out", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const limited = { status: 429, headers: { "retry-after": "0" }, body: RATE_LIMITED };
  slack.queue("chat.postMessage", limited, limited, limited);
  const exhausted = await rejection(
    createSlackWebClient(token, slack.apiUrl).chat.postMessage({ channel: CHANNEL, text: "x" }),
  );
  assert.deepEqual(slackErrorOf(exhausted), { code: "ratelimited", retryAfterMs: 0 });
  assert.equal(slack.calls.filter((call) => call.method === "chat.postMessage").length, 3);

  slack.queue("auth.test", { status: 429, headers: { "retry-after": "3" }, body: RATE_LIMITED });
  const rejecting = createSlackWebClient(token, slack.apiUrl, { rejectRateLimited: true });
  assert.deepEqual(slackErrorOf(await rejection(rejecting.auth.test())), {
    code: "ratelimited",
    retryAfterMs: 3_000,
  });
});

Deno.test("slackErrorOf() tells HTTP errors from unreachable hosts and from non-Slack errors", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const unavailable = { status: 503, headers: { "retry-after": "7" }, body: "Service Unavailable" };
  slack.queue("auth.test", unavailable, unavailable, unavailable);
  const http = await rejection(createSlackWebClient(token, slack.apiUrl).auth.test());
  assert.deepEqual(slackErrorOf(http), { code: "http_error", retryAfterMs: 7_000 });

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closed = `http://127.0.0.1:${listener.addr.port}/api/`;
  listener.close();
  const unreachable = createSlackWebClient(token, closed, { retries: 0 });
  assert.deepEqual(slackErrorOf(await rejection(unreachable.auth.test())), {
    code: "request_error",
    retryAfterMs: null,
  });

  assert.deepEqual(slackErrorOf(new TypeError("boom")), {
    code: "unknown_error",
    retryAfterMs: null,
  });
  assert.deepEqual(slackErrorOf("text"), { code: "unknown_error", retryAfterMs: null });
  assert.deepEqual(slackErrorOf(null), { code: "unknown_error", retryAfterMs: null });
});

Deno.test("encodeSlackParams() encodes as the official client: text as is, objects as JSON, nothing for absent values", () => {
  const form = encodeSlackParams({
    channel: "C1",
    text: "a & b = ü",
    unfurl_links: false,
    limit: 3,
    blocks: [{ type: "divider" }],
    metadata: { event_type: "x" },
    thread_ts: undefined,
    icon_emoji: null,
  });
  assert.equal(
    form.toString(),
    "channel=C1&text=a+%26+b+%3D+%C3%BC&unfurl_links=false&limit=3" +
      "&blocks=%5B%7B%22type%22%3A%22divider%22%7D%5D&metadata=%7B%22event_type%22%3A%22x%22%7D",
  );
});

Deno.test("createSlackWebClient() holds back the same client's calls of the method after a 429, not another method's or token's", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const client = createSlackWebClient(token, slack.apiUrl, { retries: 0 });
  const other = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("auth.test", {
    status: 429,
    headers: { "retry-after": "1" },
    body: RATE_LIMITED,
  });
  const started = performance.now();
  const limited = await rejection(client.auth.test());
  assert.equal(slackErrorOf(limited).code, "ratelimited");
  await other.auth.test();
  const otherMs = performance.now() - started;
  await client.chat.postMessage({ channel: CHANNEL, text: "Not held" });
  const otherMethodMs = performance.now() - started;
  const identity = await client.auth.test();
  const heldMs = performance.now() - started;
  assert.equal(identity.ok, true);
  assert.ok(otherMs < 900, `another token's call was not held (${otherMs} ms)`);
  assert.ok(otherMethodMs < 900, `another method's call was not held (${otherMethodMs} ms)`);
  assert.ok(heldMs >= 1_000, `the method's next call waited out Retry-After (${heldMs} ms)`);
});

Deno.test("createSlackWebClient() retries an HTTP 500 after half a second, but not a post", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("auth.test", { status: 500, body: "Internal Server Error" });
  const started = performance.now();
  const tested = await client.auth.test();
  assert.equal(tested.ok, true);
  assert.ok(performance.now() - started >= 500, "waited before retrying");
  assert.equal(slack.calls.filter((call) => call.method === "auth.test").length, 2);
  // Slack may have made the post before it failed: the caller's outbox decides.
  slack.queue("chat.postMessage", { status: 500, body: "Internal Server Error" });
  const post = await rejection(client.chat.postMessage({ channel: CHANNEL, text: "Once" }));
  assert.equal(slackErrorOf(post).code, "http_error");
  assert.equal(slack.calls.filter((call) => call.method === "chat.postMessage").length, 1);
});

Deno.test("slackErrorOf() is http_error for an answer that is not Slack's JSON, ratelimited without retry for a 429 without Retry-After", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl, { retries: 0 });
  slack.queue("auth.test", { body: "<html>maintenance</html>" }, { body: [1, 2] });
  assert.deepEqual(slackErrorOf(await rejection(client.auth.test())), {
    code: "http_error",
    retryAfterMs: null,
  });
  assert.deepEqual(slackErrorOf(await rejection(client.auth.test())).code, "http_error");

  const retrying = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("chat.postMessage", { status: 429, headers: { "retry-after": "soon" }, body: "" });
  const error = await rejection(retrying.chat.postMessage({ channel: CHANNEL, text: "x" }));
  assert.ok(error instanceof SlackCallError);
  assert.deepEqual(slackErrorOf(error), { code: "ratelimited", retryAfterMs: null });
  assert.equal(slack.calls.filter((call) => call.method === "chat.postMessage").length, 1);
});

Deno.test("createSlackWebClient() abandons an attempt that gets no answer in time: request_error", async () => {
  const silent = silentListener();
  try {
    const client = createSlackWebClient("xoxb-1", `http://127.0.0.1:${silent.port}/api/`, {
      timeoutMs: 200,
      retries: 1,
    });
    const started = performance.now();
    const error = await rejection(client.auth.test());
    assert.deepEqual(slackErrorOf(error), { code: "request_error", retryAfterMs: null });
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 900, `two attempts of 200 ms, 500 ms apart (${elapsed} ms)`);
    assert.equal(silent.accepted.length, 2, "tried twice");
  } finally {
    await silent.release();
  }
});

Deno.test("no module loads @slack/web-api at run time: only its types are imported", async () => {
  const offenders: string[] = [];
  const statement = /\b(?:import|export)\s+([^;]*?)\s*from\s*["']@slack\/web-api["']/g;
  const dynamic = /\bimport\s*\(\s*["']@slack\/web-api["']/;
  const roots = ["src", "workers", "tests", "bench"].map((dir) =>
    new URL(`../../../${dir}/`, import.meta.url)
  );
  const files = [new URL("../../../main.ts", import.meta.url)];
  while (roots.length > 0) {
    const dir = roots.pop()!;
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isDirectory) roots.push(new URL(`${entry.name}/`, dir));
      else if (entry.name.endsWith(".ts")) files.push(new URL(entry.name, dir));
    }
  }
  let typeImports = 0;
  for (const file of files) {
    const text = await Deno.readTextFile(file);
    if (dynamic.test(text)) offenders.push(file.pathname);
    for (const [, clause] of text.matchAll(statement)) {
      if (clause.startsWith("type ")) typeImports++;
      else offenders.push(file.pathname);
    }
  }
  assert.deepEqual(offenders, []);
  assert.ok(typeImports >= 1, "the scan found web_client.ts's type import");
});

Deno.test("createSlackWebClient() holds the method's next call for Retry-After also when a call's last attempt was a 429", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl, { retries: 0 });
  slack.queue("chat.postMessage", {
    status: 429,
    headers: { "retry-after": "1" },
    body: RATE_LIMITED,
  });
  const started = performance.now();
  const error = await rejection(client.chat.postMessage({ channel: CHANNEL, text: "x" }));
  assert.deepEqual(slackErrorOf(error), { code: "ratelimited", retryAfterMs: 1_000 });
  assert.ok(performance.now() - started < 900, "no attempt left: it fails at once");
  assert.equal((await client.chat.postMessage({ channel: CHANNEL, text: "y" })).ok, true);
  assert.ok(performance.now() - started >= 1_000, "the next call waited out Retry-After");
});

Deno.test("createSlackWebClient() follows no redirect: a 3xx is an http_error", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl, { retries: 0 });
  slack.queue("auth.test", {
    status: 302,
    headers: { location: `${slack.apiUrl}users.info` },
    body: "",
  });
  assert.deepEqual(slackErrorOf(await rejection(client.auth.test())), {
    code: "http_error",
    retryAfterMs: null,
  });
  assert.ok(!slack.calls.some((call) => call.method === "users.info"), "not followed");
});

Deno.test("createSlackWebClient() does not repeat a post whose answer was cut once it began, and repeats other calls", async () => {
  // A peer that answers 200 and closes the connection partway through the body.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const requests: string[] = [];
  const serving = (async () => {
    for await (const conn of listener) {
      const buffer = new Uint8Array(65_536);
      const read = await conn.read(buffer);
      requests.push(new TextDecoder().decode(buffer.subarray(0, read ?? 0)).split(" ")[1]);
      await conn.write(new TextEncoder().encode(
        'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"ok":tr',
      ));
      conn.close();
    }
  })().catch(() => {});
  try {
    const { port } = listener.addr as Deno.NetAddr;
    const client = createSlackWebClient("xoxb-1", `http://127.0.0.1:${port}/api/`, { retries: 1 });
    const post = await rejection(client.chat.postMessage({ channel: CHANNEL, text: "Once" }));
    assert.ok(post instanceof SlackCallError && post.answered);
    assert.deepEqual(slackErrorOf(post), { code: "request_error", retryAfterMs: null });
    assert.deepEqual(requests, ["/api/chat.postMessage"], "posted once");
    assert.equal(
      slackErrorOf(
        await rejection(client.chat.update({
          channel: CHANNEL,
          ts: "1.2",
          text: "Again",
        })),
      ).code,
      "request_error",
    );
    assert.deepEqual(requests.slice(1), ["/api/chat.update", "/api/chat.update"], "updated twice");
  } finally {
    listener.close();
    await serving;
  }
});
