import assert from "node:assert/strict";
import { createMediaLinks } from "../src/channels/media_links.ts";
import { Buffer } from "node:buffer";
import { createTestDatabase, type TestDatabase } from "./support/database.ts";
import { startTestServer, TEST_ENCRYPTION_KEY, type TestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, type KeyedApp } from "./support/open_api.ts";
import { type FakeGraphApi, startFakeGraphApi } from "./support/fake_graph_api.ts";
import { waitUntil } from "./support/realtime.ts";
import { eventually } from "./support/eventually.ts";
import { MAX_WHATSAPP_BODY_BYTES } from "../src/http/whatsapp.ts";
import { metaSignature } from "../src/channels/whatsapp/signature.ts";
import { whatsappWebhookBody } from "./support/whatsapp_webhook.ts";
import { configureWhatsApp, TEST_WHATSAPP } from "./support/whatsapp_channel.ts";
import { buttonsFlow, templateFlow } from "./support/flows.ts";
import type { StartOptions } from "../src/server.ts";
import { createWhatsAppInboundProcessor } from "../src/channels/whatsapp/inbound_processor.ts";
import { createCommitLoop, UNAVAILABLE } from "../src/actors/commit_loop.ts";
import type { AppCommand } from "../src/actors/protocol.ts";
import { firstAnswer } from "./support/raw_http.ts";
import { capturingErrors } from "./support/console.ts";
import { ApplyDeferredError } from "../src/channels/ordered_apply.ts";
import { executeCommand } from "../src/cli.ts";
import { applyEarlyWhatsAppStatuses } from "../src/db/whatsapp_inbound.ts";

const {
  phoneNumberId: PHONE_NUMBER_ID,
  accessToken: ACCESS_TOKEN,
  appSecret: APP_SECRET,
  verifyToken: VERIFY_TOKEN,
} = TEST_WHATSAPP;
const CUSTOMER = "16505551234";

interface Env extends AsyncDisposable {
  db: TestDatabase;
  graph: FakeGraphApi;
  server: TestServer;
  app: KeyedApp;
}

async function setUp(options: StartOptions = {}): Promise<Env> {
  const db = await createTestDatabase();
  const graph = await startFakeGraphApi({ accessToken: ACCESS_TOKEN });
  const server = await startTestServer(db.url, { WHATSAPP_GRAPH_URL: graph.url }, options);
  const app = await createKeyedApp(db.sql);
  const configured = await configureWhatsApp(db.sql, app.appId);
  assert.deepEqual(configured, { app_id: app.appId, phone_number_id: PHONE_NUMBER_ID });
  return {
    db,
    graph,
    server,
    app,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]();
      await graph[Symbol.asyncDispose]();
      await db[Symbol.asyncDispose]();
    },
  };
}

/** A webhook body with the given messages and statuses, as Meta sends them. */
function webhookBody(
  messages: unknown[],
  statuses: unknown[] = [],
  contacts: unknown[] = [{ profile: { name: "Kerry Fisher" }, wa_id: CUSTOMER }],
) {
  return whatsappWebhookBody(PHONE_NUMBER_ID, { messages, statuses, contacts });
}

let nextWamid = 0;
function textMessage(body: string, timestamp = Math.floor(Date.now() / 1000), from = CUSTOMER) {
  return {
    from,
    id: `wamid.inbound.${++nextWamid}.${crypto.randomUUID()}`,
    timestamp: String(timestamp),
    type: "text",
    text: { body },
  };
}

async function post(
  env: Env,
  body: unknown,
  options: { raw?: string; signature?: string | null } = {},
) {
  const raw = options.raw ?? JSON.stringify(body);
  const headers: Record<string, string> = { "content-type": "application/json" };
  const signature = options.signature === undefined
    ? metaSignature(new TextEncoder().encode(raw), APP_SECRET)
    : options.signature;
  if (signature !== null) headers["x-hub-signature-256"] = signature;
  const res = await fetch(`${env.server.baseUrl}/api/v1/whatsapp/webhook/${env.app.appId}`, {
    method: "POST",
    headers,
    body: raw,
  });
  await res.body?.cancel();
  return res.status;
}

async function processed(env: Env, timeoutMs?: number): Promise<void> {
  await eventually(
    () =>
      env.db.sql`
      SELECT count(*) FILTER (WHERE processed_at IS NULL) AS pending FROM whatsapp_deliveries`,
    ([row]) => row.pending === 0,
    "the delivery to be processed",
    timeoutMs,
  );
}

function sends(graph: FakeGraphApi) {
  return graph.calls.filter((call) => call.method === "POST" && call.path.endsWith("/messages"));
}

/** The application's text reply to conversation `chatId`, through the Open API. */
function sendReply(env: Env, chatId: number, content: string) {
  return apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: chatId, content },
  });
}

/** The application's `hello_world` template to conversation `chatId`, through the Open API. */
function sendTemplate(env: Env, chatId: number) {
  return apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: {
      chat_id: chatId,
      message_type: "template",
      content: JSON.stringify({ name: "hello_world", language: "en_US" }),
    },
  });
}

/** The conversation a customer's "Hello", delivered and applied, opened. */
async function customerWrote(env: Env): Promise<{ id: number }> {
  assert.equal(await post(env, webhookBody([textMessage("Hello")])), 200);
  await processed(env);
  const [chat] = await env.db.sql<{ id: number }[]>`SELECT id FROM conversations`;
  return chat;
}

Deno.test("GET /webhook answers Meta's handshake only with the right verify token", async () => {
  await using env = await setUp();
  const verify = (query: string, appId = env.app.appId) =>
    fetch(`${env.server.baseUrl}/api/v1/whatsapp/webhook/${appId}?${query}`);
  const ok = await verify(
    `hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1158201444`,
  );
  assert.equal(ok.status, 200);
  assert.match(ok.headers.get("content-type") ?? "", /^text\/plain/);
  assert.equal(await ok.text(), "1158201444");
  // Byte for byte, also bytes that are not UTF-8.
  const raw = await verify(
    `hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=%FF%FE`,
  );
  assert.deepEqual([...new Uint8Array(await raw.arrayBuffer())], [0xff, 0xfe]);
  for (
    const query of [
      "hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1",
      `hub.mode=unsubscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1`,
      "hub.mode=subscribe&hub.challenge=1",
    ]
  ) {
    const res = await verify(query);
    assert.equal(res.status, 403, query);
    await res.body?.cancel();
  }
  const other = await verify(`hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}`, 9999);
  assert.equal(other.status, 403);
  await other.body?.cancel();
});

Deno.test("POST /webhook refuses a wrong or missing signature and stores nothing", async () => {
  await using env = await setUp();
  const body = webhookBody([textMessage("Hi")]);
  assert.equal(await post(env, body, { signature: null }), 401);
  assert.equal(await post(env, body, { signature: "sha256=" + "0".repeat(64) }), 401);
  assert.equal(
    await post(env, body, { signature: metaSignature(new Uint8Array([1]), APP_SECRET) }),
    401,
  );
  // An application without WhatsApp, or no application at all: no secret matches either.
  const raw = JSON.stringify(body);
  for (const appId of [String(env.app.appId + 1), "abc", "99999999999999999999"]) {
    const res = await fetch(`${env.server.baseUrl}/api/v1/whatsapp/webhook/${appId}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-hub-signature-256": metaSignature(new TextEncoder().encode(raw), APP_SECRET),
      },
      body: raw,
    });
    assert.equal(res.status, 401, appId);
    await res.body?.cancel();
  }
  const [row] = await env.db.sql`
    SELECT (SELECT count(*) FROM whatsapp_deliveries) AS deliveries,
      (SELECT count(*) FROM messages) AS messages`;
  assert.deepEqual({ ...row }, { deliveries: 0, messages: 0 });
});

Deno.test("POST /webhook refuses a signed body over 8 MiB, declared or streamed (413), an unsigned one (401), and stores nothing", async () => {
  await using env = await setUp();
  // Validly signed, so only the size refuses it.
  const raw = JSON.stringify(webhookBody([textMessage("x".repeat(MAX_WHATSAPP_BODY_BYTES))]));
  assert.equal(await post(env, null, { raw }), 413);
  const bytes = new TextEncoder().encode(raw);
  const streamed = await fetch(`${env.server.baseUrl}/api/v1/whatsapp/webhook/${env.app.appId}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-hub-signature-256": metaSignature(bytes, APP_SECRET),
    },
    body: new ReadableStream({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 1 << 20) {
          controller.enqueue(bytes.subarray(at, at + (1 << 20)));
        }
        controller.close();
      },
    }),
  });
  assert.equal(streamed.status, 413);
  assert.equal((await streamed.json()).message, "Request body too large");
  // Unsigned, the same size is refused for its signature (CONTRACT §6.1).
  const unsigned = await fetch(`${env.server.baseUrl}/api/v1/whatsapp/webhook/${env.app.appId}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: raw,
  });
  assert.equal(unsigned.status, 401);
  await unsigned.body?.cancel();
  const [row] = await env.db.sql`SELECT count(*) AS deliveries FROM whatsapp_deliveries`;
  assert.equal(row.deliveries, 0);
});

Deno.test("POST /webhook checks the signature over the raw bytes, \\u-escaped text included", async () => {
  await using env = await setUp();
  const message = textMessage("caf\u00e9");
  // Meta escapes non-ASCII text; the signature covers those exact bytes.
  const raw = JSON.stringify(webhookBody([message])).replace("caf\u00e9", "caf\\u00e9");
  assert.ok(raw.includes("caf\\u00e9"));
  assert.equal(await post(env, null, { raw }), 200);
  await processed(env);
  const [stored] = await env.db.sql`SELECT content, external_id FROM messages`;
  assert.deepEqual({ ...stored }, { content: "café", external_id: message.id });
});

Deno.test("a batch of 3 messages and 2 statuses is applied whole, and its redelivery changes nothing", async () => {
  await using env = await setUp();
  // An outbound message first, for the statuses to name.
  const chat = await customerWrote(env);
  const reply = await sendReply(env, chat.id, "How can we help?");
  assert.equal(reply.status, 200);
  await waitUntil(() => sends(env.graph).length === 1, "the reply sent to WhatsApp");
  const sent = sends(env.graph)[0];
  assert.deepEqual(sent.body, {
    messaging_product: "whatsapp",
    recipient_type: "individual",
    to: CUSTOMER,
    type: "text",
    text: { body: "How can we help?" },
  });
  assert.equal(sent.authorization, `Bearer ${ACCESS_TOKEN}`);
  const [sentRow] = await eventually(
    () =>
      env.db.sql`SELECT external_id, status FROM messages WHERE id = ${reply.json.data.message_id}`,
    ([row]) => row.status === "sent",
    "the reply marked sent",
  );
  const wamid: string = sentRow.external_id;
  assert.match(wamid, /^wamid\./);

  const second = "15550001111";
  const ts = Math.floor(Date.now() / 1000);
  const batch = webhookBody(
    [textMessage("one", ts), textMessage("two", ts), textMessage("three", ts, second)],
    [
      { id: wamid, status: "delivered", timestamp: String(ts), recipient_id: CUSTOMER },
      { id: wamid, status: "read", timestamp: String(ts + 1), recipient_id: CUSTOMER },
    ],
    [
      { profile: { name: "Kerry Fisher" }, wa_id: CUSTOMER },
      { profile: { name: "Sam Lee" }, wa_id: second },
    ],
  );
  assert.equal(await post(env, batch), 200);
  await processed(env);
  assert.equal(await post(env, batch), 200);
  await processed(env);

  const rows = await env.db.sql`
    SELECT m.content, m.sender_type, c.channel, cl.name, m.platform_timestamp
    FROM messages m JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    JOIN clients cl ON cl.app_id = c.app_id AND cl.id = c.client_id
    WHERE m.sender_type = 'visitor' ORDER BY m.id`;
  assert.deepEqual(rows.map((row) => `${row.name}: ${row.content}`), [
    "Kerry Fisher: Hello",
    "Kerry Fisher: one",
    "Kerry Fisher: two",
    "Sam Lee: three",
  ]);
  assert.ok(rows.every((row) => row.channel === "whatsapp"));
  assert.equal(rows[1].platform_timestamp, new Date(ts * 1000).toISOString().replace("Z", "000Z"));
  const [status] = await env.db.sql`SELECT status FROM messages WHERE external_id = ${wamid}`;
  assert.equal(status.status, "read");
  const [counts] = await env.db.sql`
    SELECT count(*) AS conversations, count(DISTINCT client_id) AS clients FROM conversations`;
  assert.deepEqual({ ...counts }, { conversations: 2, clients: 2 });
});

Deno.test("statuses move forward only; failed is final and keeps Meta's error", async () => {
  await using env = await setUp();
  const chat = await customerWrote(env);
  const ids: string[] = [];
  for (const content of ["first", "second"]) {
    const res = await apiCall(env.server.baseUrl, "/messages", {
      key: env.app.key,
      json: { chat_id: chat.id, content },
    });
    assert.equal(res.status, 200);
  }
  await waitUntil(() => sends(env.graph).length === 2, "both replies sent");
  const sentRows = await eventually(
    () =>
      env.db.sql`
      SELECT external_id FROM messages WHERE sender_type = 'bot' AND external_id IS NOT NULL ORDER BY id`,
    (rows) => rows.length === 2,
    "both wamids stored",
  );
  ids.push(...sentRows.map((row) => row.external_id));
  const ts = String(Math.floor(Date.now() / 1000));
  const status = (id: string, value: string, extra = {}) => ({
    id,
    status: value,
    timestamp: ts,
    recipient_id: CUSTOMER,
    ...extra,
  });
  const failure = { errors: [{ code: 131047, title: "Re-engagement message" }] };
  assert.equal(
    await post(
      env,
      webhookBody([], [
        status(ids[0], "read"),
        status(ids[0], "delivered"),
        status(ids[1], "failed", failure),
        status(ids[1], "read"),
        status("wamid.unknown", "read"),
      ]),
    ),
    200,
  );
  await processed(env);
  const rows = await env.db.sql`
    SELECT status, failure_code, failure_title FROM messages
    WHERE sender_type = 'bot' ORDER BY id`;
  assert.deepEqual(rows.map((row) => ({ ...row })), [
    { status: "read", failure_code: null, failure_title: null },
    { status: "failed", failure_code: 131047, failure_title: "Re-engagement message" },
  ]);
  // The Open API shows why: the platform's error code and title.
  const history = await apiCall(env.server.baseUrl, `/conversations/${chat.id}/messages`, {
    key: env.app.key,
  });
  const bot = history.json.data.filter((m: { sender_type: string }) => m.sender_type === "bot");
  assert.deepEqual(bot.map((m: { error?: unknown }) => m.error), [
    undefined,
    { code: 131047, title: "Re-engagement message" },
  ]);
});

Deno.test("receipts that beat the send's answer are applied once the send is recorded", async () => {
  await using env = await setUp();
  // Meta's answer to the send is slow: its receipts come first. (Answered in any case before the
  // fake stops, which waits for it: disposed before `env`.)
  const answer = Promise.withResolvers<void>();
  await using _answered = { [Symbol.asyncDispose]: () => Promise.resolve(answer.resolve()) };
  const chat = await customerWrote(env);
  env.graph.queueMessageResponses({
    status: 200,
    body: {
      messaging_product: "whatsapp",
      contacts: [{ input: CUSTOMER, wa_id: CUSTOMER }],
      messages: [{ id: "wamid.EARLY" }],
    },
    after: answer.promise,
  });
  const res = await sendReply(env, chat.id, "Your order shipped");
  assert.equal(res.status, 200);
  await waitUntil(() => sends(env.graph).length === 1, "the send made");
  const ts = String(Math.floor(Date.now() / 1000));
  const receipt = (status: string) => ({ id: "wamid.EARLY", status, timestamp: ts });
  assert.equal(
    await post(env, webhookBody([], [receipt("sent"), receipt("delivered")])),
    200,
  );
  await processed(env);
  const status = () =>
    env.db.sql`SELECT status FROM messages WHERE id = ${res.json.data.message_id}`.then((rows) =>
      rows[0].status
    );
  assert.equal(await status(), "pending", "nothing to apply them to yet");
  answer.resolve();
  await eventually(status, (value) => value === "delivered", "the early receipts applied");
  const kept = await env.db.sql`SELECT count(*)::int AS n FROM whatsapp_early_statuses`;
  assert.equal(kept[0].n, 0);
  // The sweep applies a receipt kept after its send's record had looked (their transactions
  // crossed), and keeps one for a send never recorded.
  await env.db.sql`
    INSERT INTO whatsapp_early_statuses (app_id, wamid, status) VALUES
      (${env.app.appId}, 'wamid.EARLY', 'read'), (${env.app.appId}, 'wamid.NEVER', 'read')`;
  assert.equal(await applyEarlyWhatsAppStatuses(env.db.sql), 0, "no webhook subscribed");
  assert.equal(await status(), "read");
  const left = await env.db.sql`SELECT wamid FROM whatsapp_early_statuses`;
  assert.deepEqual(left.map((row) => row.wamid), ["wamid.NEVER"]);
});

Deno.test("each inbound kind is stored readably; media get a proxy link that streams the file", async () => {
  await using env = await setUp();
  const bytes = new TextEncoder().encode("\x89PNG fake image bytes");
  env.graph.addMedia("1048576", bytes, "image/png");
  const base = { from: CUSTOMER, timestamp: String(Math.floor(Date.now() / 1000)) };
  const messages = [
    {
      ...base,
      id: "wamid.k1",
      type: "image",
      image: { id: "1048576", mime_type: "image/png", sha256: "x", caption: "my cat" },
    },
    { ...base, id: "wamid.k2", type: "audio", audio: { id: "2", mime_type: "audio/ogg" } },
    {
      ...base,
      id: "wamid.k3",
      type: "location",
      location: { latitude: 52.52, longitude: 13.405, name: "Office" },
    },
    {
      ...base,
      id: "wamid.k4",
      type: "unsupported",
      errors: [{ code: 131051, title: "Message type unknown" }],
    },
  ];
  assert.equal(await post(env, webhookBody(messages)), 200);
  await processed(env);
  const rows = await env.db.sql`SELECT message_type, content, payload FROM messages ORDER BY id`;
  assert.deepEqual(rows.map((row) => row.message_type), ["image", "file", "text", "text"]);
  assert.match(rows[2].content, /Office/);
  assert.match(rows[3].content, /unsupported/i);
  const link = new URL(rows[0].payload.url);
  assert.equal(rows[0].payload.caption, "my cat");
  assert.equal(rows[0].payload.mime_type, "image/png");
  assert.equal(link.pathname, "/api/v1/whatsapp/media/1048576");
  assert.match(link.search, /^\?exp=\d+&sig=[0-9a-f]{64}$/);

  const proxied = await fetch(`${env.server.baseUrl}${link.pathname}${link.search}`);
  assert.equal(proxied.status, 200);
  assert.equal(proxied.headers.get("content-type"), "image/png");
  assert.equal(proxied.headers.get("content-disposition"), "inline");
  assert.match(proxied.headers.get("content-security-policy") ?? "", /sandbox/);
  assert.deepEqual(new Uint8Array(await proxied.arrayBuffer()), bytes);
  // Meta's download URLs expire within minutes: the proxy looks the media up again.
  env.graph.expireMediaUrls();
  const again = await fetch(`${env.server.baseUrl}${link.pathname}${link.search}`);
  assert.equal(again.status, 200);
  await again.body?.cancel();

  for (
    const search of [
      "",
      link.search.replace(/sig=[0-9a-f]/, "sig=g"),
      link.search.replace(/exp=\d/, "exp=9"),
    ]
  ) {
    const refused: Response = await fetch(`${env.server.baseUrl}${link.pathname}${search}`);
    assert.equal(refused.status, 403, search);
    await refused.body?.cancel();
  }
  const otherMedia = await fetch(`${env.server.baseUrl}/api/v1/whatsapp/media/999${link.search}`);
  assert.equal(otherMedia.status, 403);
  await otherMedia.body?.cancel();
  // A link signed for another application (as one would be if it claimed the same media id)
  // is refused: the media was received for this application only.
  const links = createMediaLinks({
    encryptionKey: new Uint8Array(Buffer.from(TEST_ENCRYPTION_KEY, "base64")),
    publicBaseUrl: env.server.baseUrl,
  });
  const otherApp = await fetch(links.link(env.app.appId + 1, "1048576"));
  assert.equal(otherApp.status, 403);
  await otherApp.body?.cancel();
  const own = await fetch(links.link(env.app.appId, "1048576"));
  assert.equal(own.status, 200);
  await own.body?.cancel();
  // Media Meta would have downloaded from elsewhere: the access token is not sent there.
  env.graph.addMedia("2", bytes, "audio/ogg", "https://files.example.net/2.ogg");
  const audio = new URL(rows[1].payload.url);
  const elsewhere = await fetch(`${env.server.baseUrl}${audio.pathname}${audio.search}`);
  assert.deepEqual([elsewhere.status, await elsewhere.json()], [403, {
    code: 403,
    message: "File is not on a Meta media host",
  }]);
});

Deno.test("an unreadable error code in a status sinks nothing else of its delivery", async () => {
  await using env = await setUp();
  const failed = {
    id: "wamid.nobody",
    status: "failed",
    timestamp: String(Math.floor(Date.now() / 1000)),
    recipient_id: CUSTOMER,
    errors: [{ code: 3_000_000_000, title: "x" }],
  };
  const other = "15550008888";
  const contacts = [{ profile: { name: "Other" }, wa_id: other }];
  assert.equal(
    await post(env, webhookBody([textMessage("still here", undefined, other)], [failed], contacts)),
    200,
  );
  await processed(env);
  const rows = await env.db.sql`SELECT content FROM messages`;
  assert.deepEqual(rows.map((row) => row.content), ["still here"]);
  const [delivery] = await env.db.sql`SELECT attempts, last_error FROM whatsapp_deliveries`;
  assert.deepEqual({ ...delivery }, { attempts: 0, last_error: null });
});

Deno.test("an id longer than any Meta gives sinks only its own part of the delivery", async () => {
  await using env = await setUp();
  const long = "9".repeat(6_000);
  const image = {
    ...textMessage("unused"),
    type: "image",
    image: { id: long, mime_type: "image/png" },
  };
  const body = webhookBody(
    [
      textMessage("first"),
      { ...textMessage("too long an id"), id: `wamid.${long}` },
      { ...textMessage("too long a number"), from: long },
      image,
      textMessage("last"),
    ],
    [{ id: `wamid.${long}`, status: "read", timestamp: "1700000000", recipient_id: CUSTOMER }],
  );
  assert.equal(await post(env, body), 200);
  await processed(env);
  const rows = await env.db.sql`SELECT content FROM messages ORDER BY id`;
  assert.deepEqual(rows.map((row) => row.content), ["first", "last"]);
  const [delivery] = await env.db.sql`SELECT attempts, last_error FROM whatsapp_deliveries`;
  assert.deepEqual({ ...delivery }, { attempts: 0, last_error: null });
  // A NUL in a customer's number is read without it, from the delivery's store on.
  const nul = { ...textMessage("number with a NUL"), from: `${CUSTOMER}\u0000` };
  assert.equal(await post(env, webhookBody([nul])), 200);
  await processed(env);
  const [last] = await env.db.sql`SELECT content FROM messages ORDER BY id DESC LIMIT 1`;
  assert.equal(last.content, "number with a NUL");
  // A lone surrogate (which jsonb refuses) neither: stored together, both are acknowledged.
  const surrogate = { ...textMessage("number with a lone surrogate"), from: `${CUSTOMER}\ud800` };
  const answers = await Promise.all([
    post(env, webhookBody([surrogate])),
    post(env, webhookBody([textMessage("sent with it")])),
  ]);
  assert.deepEqual(answers, [200, 200]);
  await processed(env);
  const latest = await env.db.sql`SELECT content FROM messages ORDER BY id DESC LIMIT 2`;
  assert.deepEqual(latest.map((row) => row.content).sort(), [
    "number with a lone surrogate",
    "sent with it",
  ]);
  // A media type is platform text too: kept as PostgreSQL can store it, its message with it.
  const typed = {
    ...textMessage("unused"),
    type: "document",
    document: { id: "4490709327384033", mime_type: "application/pdf\ud800" },
  };
  assert.equal(await post(env, webhookBody([typed])), 200);
  await processed(env);
  const [file] = await env.db.sql`SELECT payload FROM messages ORDER BY id DESC LIMIT 1`;
  assert.equal(file.payload.mime_type, "application/pdf\uFFFD");
});

Deno.test("a delivery that cannot be handed to its actor counts an attempt, so recovery ends", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const body = new TextEncoder().encode(JSON.stringify(webhookBody([textMessage("lost?")])));
  const [{ id }] = await db.sql`
    INSERT INTO whatsapp_deliveries (app_id, body) VALUES (${app.appId}, ${body}) RETURNING id`;
  const processor = createWhatsAppInboundProcessor({
    sql: db.sql,
    ask: () => {
      throw new Error("no worker to take it");
    },
    mediaLinks: createMediaLinks({
      encryptionKey: new Uint8Array(32),
      publicBaseUrl: "http://localhost",
    }),
    applyWindowMs: 1,
  });
  await assert.rejects(
    processor.process(app.appId, id, body, { phoneNumberId: PHONE_NUMBER_ID }),
    /no worker/,
  );
  const [delivery] = await db.sql`SELECT attempts, last_error FROM whatsapp_deliveries`;
  assert.deepEqual({ ...delivery }, { attempts: 1, last_error: "no worker to take it" });
});

/** A delivery of one text message stored for application `appId`, as the webhook stores it. */
async function storedDelivery(sql: TestDatabase["sql"], appId: number, text: string) {
  const body = new TextEncoder().encode(JSON.stringify(webhookBody([textMessage(text)])));
  const [{ id }] = await sql`
    INSERT INTO whatsapp_deliveries (app_id, body) VALUES (${appId}, ${body}) RETURNING id`;
  return { id: Number(id), body };
}

/** An inbound processor over `ask`, its retries as `retry` says (the actor is the test's). */
function processorAsking(
  sql: TestDatabase["sql"],
  ask: Parameters<typeof createWhatsAppInboundProcessor>[0]["ask"],
  retry: Parameters<typeof createWhatsAppInboundProcessor>[0]["retry"],
) {
  return createWhatsAppInboundProcessor({
    sql,
    ask,
    mediaLinks: createMediaLinks({
      encryptionKey: new Uint8Array(32),
      publicBaseUrl: "http://localhost",
    }),
    applyWindowMs: 1,
    retry,
  });
}

Deno.test("a delivery failing while the database is unreachable is retried before those behind it", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const stored = (text: string) => storedDelivery(db.sql, app.appId, text);
  const first = await stored("first");
  const second = await stored("second");
  const asked: string[] = [];
  let unreachable = 2;
  const processor = processorAsking(db.sql, (_key, command) => {
    const entry = command.kind === "whatsapp.inbound" ? command.entries[0] : null;
    const text = entry?.kind === "message" ? entry.content : "?";
    asked.push(text);
    if (text === "first" && unreachable-- > 0) return Promise.resolve(UNAVAILABLE);
    return Promise.resolve({ ok: true, value: { applied: 1 } });
  }, { retryDelaysMs: [20] });
  const applyingFirst = processor.process(app.appId, first.id, first.body, {
    phoneNumberId: PHONE_NUMBER_ID,
  });
  await waitUntil(() => asked.length > 0, "the first's first attempt"); // answered: it failed
  await Promise.all([
    applyingFirst,
    processor.process(app.appId, second.id, second.body, { phoneNumberId: PHONE_NUMBER_ID }),
  ]);
  assert.deepEqual(asked, ["first", "first", "first", "second"]);
  const attempts = await db.sql`SELECT attempts FROM whatsapp_deliveries ORDER BY id`;
  assert.deepEqual(attempts.map((row) => row.attempts), [0, 0], "no failure recorded");

  // One that stays unreachable is given up, counted as an attempt, for recovery to try later.
  const third = await stored("first");
  const stubborn = processorAsking(db.sql, () => Promise.resolve(UNAVAILABLE), {
    retryDelaysMs: [10],
    retryWithinMs: 50,
  });
  await assert.rejects(
    stubborn.process(app.appId, third.id, third.body, { phoneNumberId: PHONE_NUMBER_ID }),
    /Internal server error/,
  );
  const [left] = await db.sql`SELECT attempts FROM whatsapp_deliveries WHERE id = ${third.id}`;
  assert.equal(left.attempts, 1);

  // Stopped (at shutdown) while waiting for its retry: left to recovery, no attempt counted.
  const fourth = await stored("fourth");
  const stopping = processorAsking(db.sql, () => Promise.resolve(UNAVAILABLE), {
    retryDelaysMs: [60_000],
    // Room for the pause: one as long as the deadline is given up at once (a millisecond late).
    retryWithinMs: 600_000,
  });
  const abandoned = stopping.process(app.appId, fourth.id, fourth.body, {
    phoneNumberId: PHONE_NUMBER_ID,
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  stopping.stop();
  await assert.rejects(abandoned, ApplyDeferredError);
  const [kept] = await db.sql`
    SELECT attempts, processed_at FROM whatsapp_deliveries WHERE id = ${fourth.id}`;
  assert.deepEqual({ ...kept }, { attempts: 0, processed_at: null });
});

Deno.test("a delivery handed over behind one that fails is not applied before its retry", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const stored = (text: string) => storedDelivery(db.sql, app.appId, text);
  const textOf = (command: AppCommand) => {
    const entry = command.kind === "whatsapp.inbound" ? command.entries[0] : null;
    return entry?.kind === "message" ? entry.content : "?";
  };
  class Unreachable extends Error {}
  const secondQueued = Promise.withResolvers<void>();
  const committed: string[] = [];
  let failures = 2; // the first's batch, then the first alone
  // The application's actor, in front of a database that drops the first delivery's transaction
  // once the second is already queued behind it.
  const actor = createCommitLoop({
    commit: async (commands) => {
      const texts = commands.map(textOf);
      if (texts.includes("first") && failures > 0) {
        await secondQueued.promise;
        failures--;
        throw new Unreachable("connection ended");
      }
      committed.push(...texts);
      return commands.map(() => ({ ok: true, value: { applied: 1 } }));
    },
    isRetryable: (error) => error instanceof Unreachable,
  });
  const processor = processorAsking(db.sql, (key, command) => {
    const answer = actor.submit(key, command);
    if (textOf(command) === "second") secondQueued.resolve();
    return answer;
  }, { retryDelaysMs: [20] });
  const first = await stored("first");
  const second = await stored("second");
  await capturingErrors(async () => {
    await Promise.all([
      processor.process(app.appId, first.id, first.body, { phoneNumberId: PHONE_NUMBER_ID }),
      processor.process(app.appId, second.id, second.body, { phoneNumberId: PHONE_NUMBER_ID }),
    ]);
  });
  assert.deepEqual(committed, ["first", "second"], "the customer's messages stay in order");
  await actor.stop();
});

Deno.test("live deliveries wait until the recovery at start has handed over the older ones", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const body = new TextEncoder().encode(JSON.stringify(webhookBody([textMessage("hi")])));
  // More than a page of deliveries a crash left unapplied.
  const left = await db.sql<{ id: string }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body)
    SELECT ${app.appId}, ${body} FROM generate_series(1, 130) RETURNING id`;
  const asked: number[] = [];
  const processor = processorAsking(db.sql, (_key, command) => {
    if (command.kind === "whatsapp.inbound") asked.push(command.deliveryId);
    return Promise.resolve({ ok: true, value: { applied: 1 } });
  }, {});
  const recovered = processor.recover({ olderThanSeconds: 0, holdLive: true });
  // Acknowledged just after the restart (the fake actor never reads its stored row).
  const live = processor.process(app.appId, 1_000_000, body, { phoneNumberId: PHONE_NUMBER_ID });
  assert.equal(await recovered, left.length);
  await live;
  assert.deepEqual(asked, [...left.map((row) => Number(row.id)), 1_000_000]);
});

Deno.test("a webhook POST whose signature cannot pass is refused before its body is sent", async () => {
  await using env = await setUp();
  const cases = [null, "sha1=abc", `sha256=${"0".repeat(63)}`].flatMap((signature) => [
    { signature, appId: env.app.appId, length: "Content-Length: 8000000" },
    { signature, appId: env.app.appId, length: "Transfer-Encoding: chunked" },
  ]);
  // An application without a channel has no secret to match, whatever the signature.
  const good = `sha256=${"0".repeat(64)}`;
  cases.push({ signature: good, appId: 999_999, length: "Transfer-Encoding: chunked" });
  for (const { signature, appId, length } of cases) {
    // 8 MB announced, or a chunked body begun, the rest never sent: an answer proves nothing
    // waited for the upload.
    const answer = await firstAnswer(env.server.baseUrl, [
      `POST /api/v1/whatsapp/webhook/${appId} HTTP/1.1`,
      "Host: parley.test",
      "Content-Type: application/json",
      length,
      ...(signature === null ? [] : [`X-Hub-Signature-256: ${signature}`]),
      "",
      length.startsWith("Transfer") ? '10\r\n{"object":"what' : "",
    ]);
    assert.match(answer, /^HTTP\/1\.1 401 /, `${signature} ${appId} ${length}: ${answer}`);
  }
  const [row] = await env.db.sql`SELECT count(*)::int AS n FROM whatsapp_deliveries`;
  assert.equal(row.n, 0);
});

Deno.test("stopping waits for a media download only for its grace period", async () => {
  // The proxy gives a stalled upstream body 30 s; stopping must not wait that long.
  await using env = await setUp({ shutdownGraceMs: 300 });
  const bytes = new TextEncoder().encode("0123456789abcdef");
  env.graph.addMedia("77", bytes, "image/png");
  env.graph.stallDownloads();
  const base = { from: CUSTOMER, timestamp: String(Math.floor(Date.now() / 1000)) };
  const image = {
    ...base,
    id: "wamid.stall",
    type: "image",
    image: { id: "77", mime_type: "image/png" },
  };
  assert.equal(await post(env, webhookBody([image])), 200);
  await processed(env);
  const [row] = await env.db.sql`SELECT payload FROM messages`;
  const link = new URL(row.payload.url);
  const download = await fetch(`${env.server.baseUrl}${link.pathname}${link.search}`);
  assert.equal(download.status, 200);
  const reader = download.body!.getReader();
  const first = await reader.read();
  assert.deepEqual(first.value, bytes.slice(0, 8));

  const started = performance.now();
  const stopped = env.server.parley.stop().then(() => performance.now() - started);
  const deadline = Promise.withResolvers<number>();
  const timer = setTimeout(() => deadline.resolve(Infinity), 8_000);
  const waited = await Promise.race([stopped, deadline.promise]);
  clearTimeout(timer);
  assert.ok(waited < 8_000, `stopping waited ${waited} ms for the stalled download`);
  await reader.cancel();
});

Deno.test("the 24-hour window: free-form inside, 422 outside, templates always", async () => {
  await using env = await setUp();
  const old = Math.floor(Date.now() / 1000) - 25 * 3600;
  assert.equal(await post(env, webhookBody([textMessage("long ago", old)])), 200);
  await processed(env);
  const [chat] = await env.db.sql`SELECT id FROM conversations`;
  const outside = await sendReply(env, chat.id, "Hello again");
  assert.deepEqual(outside.json, {
    code: 422,
    message: "Outside the 24-hour window: only template messages can be sent",
  });
  const template = await sendTemplate(env, chat.id);
  assert.equal(template.status, 200);
  await waitUntil(() => sends(env.graph).length === 1, "the template sent");
  assert.deepEqual((sends(env.graph)[0].body as { template: unknown }).template, {
    name: "hello_world",
    language: { code: "en_US" },
  });

  assert.equal(await post(env, webhookBody([textMessage("now")])), 200);
  await processed(env);
  const inside = await sendReply(env, chat.id, "Hello again");
  assert.equal(inside.status, 200);
});

/**
 * The customer's conversation opened by `message`, closed, and the new one their next message
 * opened.
 */
async function twoConversations(env: Env, message: unknown) {
  assert.equal(await post(env, webhookBody([message])), 200);
  await processed(env);
  const [first] = await env.db.sql`SELECT id FROM conversations`;
  await executeCommand(env.db.sql, {
    command: "chat:close",
    flags: { app: String(env.app.appId), id: String(first.id) },
  });
  assert.equal(await post(env, webhookBody([textMessage("Me again")])), 200);
  await processed(env);
  const chats = await env.db.sql`SELECT id, status FROM conversations ORDER BY id`;
  assert.deepEqual(chats.map((row) => row.status), ["closed", "open"], "a new conversation");
  return { closed: first.id as number, open: chats[1].id as number };
}

Deno.test("the 24-hour window is the customer's: a reply to their closed conversation goes out once they wrote again", async () => {
  await using env = await setUp();
  const old = Math.floor(Date.now() / 1000) - 25 * 3600;
  const { closed } = await twoConversations(env, textMessage("long ago", old));
  const reply = await sendReply(env, closed, "About your earlier question");
  assert.equal(reply.status, 200, "the customer wrote a moment ago");
  await waitUntil(() => sends(env.graph).length === 1, "the reply sent");
});

Deno.test("a message dated in the future keeps the 24-hour window open no longer than one sent now", async () => {
  await using env = await setUp();
  const nextWeek = Math.floor(Date.now() / 1000) + 7 * 24 * 3600;
  assert.equal(await post(env, webhookBody([textMessage("from the future", nextWeek)])), 200);
  await processed(env);
  const [chat] = await env.db.sql`
    SELECT last_inbound_at <= clock_timestamp() AS bounded FROM conversations`;
  assert.equal(chat.bounded, true);
});

Deno.test("sends to one customer keep their order across their conversations while one is retried", async () => {
  await using env = await setUp();
  const { closed, open } = await twoConversations(env, textMessage("Hello"));
  env.graph.queueMessageResponses({
    status: 500,
    body: env.graph.errorBody(1, "An unknown error occurred"),
  });
  const reply = (chatId: number, content: string) =>
    apiCall(env.server.baseUrl, "/messages", {
      key: env.app.key,
      json: { chat_id: chatId, content },
    });
  assert.equal((await reply(closed, "first")).status, 200);
  await waitUntil(() => sends(env.graph).length === 1, "the first attempt, refused");
  assert.equal((await reply(open, "second")).status, 200);
  await waitUntil(() => sends(env.graph).length === 3, "the retry and the second", 20_000);
  assert.deepEqual(
    sends(env.graph).map((send) => (send.body as { text: { body: string } }).text.body),
    ["first", "first", "second"],
  );
});

Deno.test("a free-form send retried after the 24-hour window closed fails instead of going out; a template still goes", async () => {
  await using env = await setUp();
  const chat = await customerWrote(env);
  env.graph.queueMessageResponses({
    status: 500,
    body: env.graph.errorBody(1, "An unknown error occurred"),
  });
  const late = await sendReply(env, chat.id, "late");
  assert.equal(late.status, 200, "accepted inside the window");
  await waitUntil(() => sends(env.graph).length === 1, "the first attempt, refused");
  // The window closes while the send waits for its retry.
  await env.db.sql`
    UPDATE conversations SET last_inbound_at = clock_timestamp() - interval '25 hours'`;
  const template = await sendTemplate(env, chat.id);
  assert.equal(template.status, 200);
  const [failed] = await eventually(
    () =>
      env.db.sql`
      SELECT status, failure_code, failure_title FROM messages
      WHERE id = ${late.json.data.message_id}`,
    ([row]) => row.status === "failed",
    "the late message marked failed",
    20_000,
  );
  assert.deepEqual({ ...failed }, {
    status: "failed",
    failure_code: 131047,
    failure_title: "Outside the 24-hour window: only template messages can be sent",
  });
  await waitUntil(() => sends(env.graph).length === 2, "the template sent", 20_000);
  assert.deepEqual(
    sends(env.graph).map((send) => (send.body as { type: string }).type),
    ["text", "template"],
    "the late text never went out again",
  );
});

Deno.test("sends retry on 429 and 500, honour Retry-After, and fail at once on a 400", async () => {
  await using env = await setUp();
  const chat = await customerWrote(env);
  env.graph.queueMessageResponses(
    {
      status: 429,
      body: env.graph.errorBody(130429, "Rate limit hit"),
      headers: { "retry-after": "1" },
    },
    { status: 500, body: env.graph.errorBody(1, "An unknown error occurred") },
  );
  const started = Date.now();
  const retried = await sendReply(env, chat.id, "retried");
  assert.equal(retried.status, 200);
  await waitUntil(() => sends(env.graph).length === 3, "three attempts", 20_000);
  const [current] = await eventually(
    () => env.db.sql`SELECT status FROM messages WHERE id = ${retried.json.data.message_id}`,
    ([row]) => row.status === "sent",
    "the retried message marked sent",
  );
  assert.equal(current.status, "sent");
  assert.ok(Date.now() - started >= 1_000, "the Retry-After second was honoured");
  const [outbox] = await env.db.sql`
    SELECT attempts, state FROM outbox WHERE kind = 'whatsapp'
      AND (payload ->> 'message_id')::bigint = ${retried.json.data.message_id}`;
  assert.deepEqual({ ...outbox }, { attempts: 3, state: "succeeded" });

  env.graph.queueMessageResponses({
    status: 400,
    body: env.graph.errorBody(131026, "(#131026) Message undeliverable"),
  });
  const refused = await sendReply(env, chat.id, "refused");
  assert.equal(refused.status, 200);
  await waitUntil(() => sends(env.graph).length === 4, "the refused attempt");
  const [failed] = await eventually(
    () =>
      env.db.sql`
      SELECT status, failure_code, failure_title FROM messages
      WHERE id = ${refused.json.data.message_id}`,
    ([row]) => row.status === "failed",
    "the refused message marked failed",
  );
  assert.deepEqual({ ...failed }, {
    status: "failed",
    failure_code: 131026,
    failure_title: "(#131026) Message undeliverable",
  }, "Meta's own words");
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  assert.equal(sends(env.graph).length, 4, "no retry after a 400");
});

Deno.test("a send Meta accepted with an answer that cannot be read is sent, not failed, and never sent again", async () => {
  await using env = await setUp();
  const chat = await customerWrote(env);
  env.graph.queueMessageResponses({ status: 200, body: '{"messaging_product":"whats' });
  const reply = await sendReply(env, chat.id, "accepted");
  assert.equal(reply.status, 200);
  const [sent] = await eventually(
    () =>
      env.db.sql`
      SELECT status, external_id, failure_code FROM messages
      WHERE id = ${reply.json.data.message_id}`,
    ([row]) => row.status !== "pending",
    "the message's outcome",
  );
  assert.deepEqual({ ...sent }, { status: "sent", external_id: null, failure_code: null });
  const [outbox] = await env.db.sql`
    SELECT attempts, state FROM outbox WHERE kind = 'whatsapp'
      AND (payload ->> 'message_id')::bigint = ${reply.json.data.message_id}`;
  assert.deepEqual({ ...outbox }, { attempts: 1, state: "succeeded" });
  assert.equal(sends(env.graph).length, 1);
});

/**
 * Sets `flow`, lets the customer write `text`, and answers the Flow's first message as sent to
 * WhatsApp (its body) with its wamid, for a click to name.
 */
async function startFlow(env: Env, flow: unknown, text: string) {
  const put = await apiCall(env.server.baseUrl, "/flow", {
    method: "PUT",
    key: env.app.key,
    json: flow,
  });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  assert.equal(await post(env, webhookBody([textMessage(text)])), 200);
  await waitUntil(() => sends(env.graph).length === 1, "the Flow's first message sent");
  const [part] = await eventually(
    () => env.db.sql`SELECT wamid FROM whatsapp_sent_parts`,
    (rows) => rows.length > 0,
    "the sent part's wamid",
  );
  return { body: sends(env.graph)[0].body, wamid: part.wamid as string };
}

/** The customer's message `id`, sent now in reply to our message `wamid`, with its `fields`. */
function replyTo(wamid: string, id: string, fields: Record<string, unknown>) {
  return {
    from: CUSTOMER,
    id,
    timestamp: String(Math.floor(Date.now() / 1000)),
    context: { from: "15550783881", id: wamid },
    ...fields,
  };
}

Deno.test("a Flow runs over WhatsApp: buttons go out as reply buttons, a button_reply advances it", async () => {
  await using env = await setUp();
  const flow = buttonsFlow([{ id: "sales", title: "Sales" }], { sales: "sales" }, {
    sales: { message: { message_type: "text", content: "A rep is on the way." }, then: "handoff" },
  });
  const { body, wamid } = await startFlow(env, flow, "Hi");
  const buttons = body as { type: string; interactive: { type: string } };
  assert.equal(buttons.type, "interactive");
  assert.equal(buttons.interactive.type, "button");
  const click = replyTo(wamid, "wamid.click.1", {
    type: "interactive",
    interactive: { type: "button_reply", button_reply: { id: "sales", title: "Sales" } },
  });
  assert.equal(await post(env, webhookBody([click])), 200);
  await waitUntil(() => sends(env.graph).length === 2, "the next node sent");
  assert.deepEqual((sends(env.graph)[1].body as { text: unknown }).text, {
    body: "A rep is on the way.",
  });
  // Meta redelivers: the click is not applied twice.
  assert.equal(await post(env, webhookBody([click])), 200);
  await processed(env);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(sends(env.graph).length, 2);
  const rows = await env.db.sql`SELECT sender_type, content FROM messages ORDER BY id`;
  assert.deepEqual(rows.map((row) => row.sender_type), ["visitor", "flow", "visitor", "flow"]);
  assert.equal(rows[2].content, "Sales");
});

Deno.test("a list_reply is stored with the button's whole title, not the shortened row WhatsApp shows", async () => {
  await using env = await setUp();
  const billing = "Talk to someone about billing";
  const titles = ["Sales", "Support", "Returns", billing];
  const flow = buttonsFlow(titles.map((title, i) => ({ id: `b${i}`, title })), { b3: "handoff" });
  const { body, wamid } = await startFlow(env, flow, "Hi");
  const list = body as {
    interactive: {
      type: string;
      action: { sections: { rows: { id: string; title: string }[] }[] };
    };
  };
  assert.equal(list.interactive.type, "list");
  const row = list.interactive.action.sections.flatMap((section) => section.rows)[3];
  assert.ok(row.title.length <= 24 && row.title !== billing, "the row's title is cut short");
  const click = replyTo(wamid, "wamid.click.list", {
    type: "interactive",
    interactive: { type: "list_reply", list_reply: { id: row.id, title: row.title } },
  });
  assert.equal(await post(env, webhookBody([click])), 200);
  const [stored] = await eventually(
    () => env.db.sql`SELECT content FROM messages WHERE external_id = 'wamid.click.list'`,
    (rows) => rows.length > 0,
    "the click stored",
  );
  assert.equal(stored.content, billing);
});

Deno.test("deliveries acknowledged but not applied before a crash are applied at the next start, in order", async () => {
  await using env = await setUp();
  // Received a moment before the crash: the start does not wait for them to be a minute old,
  // and recovers more than one page of them.
  const texts = Array.from({ length: 250 }, (_, i) => `Sent just before the crash, #${i}`);
  const bodies = texts.map((text) => JSON.stringify(webhookBody([textMessage(text)])));
  await env.db.sql`
    INSERT INTO whatsapp_deliveries (app_id, body, received_at)
    SELECT ${env.app.appId}, convert_to(body, 'UTF8'), clock_timestamp() - interval '1 second'
    FROM unnest(${bodies}::text[]) WITH ORDINALITY AS d(body, n) ORDER BY n`;
  await using restarted = await startTestServer(env.db.url, { WHATSAPP_GRAPH_URL: env.graph.url });
  assert.ok(restarted.baseUrl);
  await processed(env, 20_000);
  const stored = await env.db.sql<{ content: string }[]>`
    SELECT content FROM messages WHERE sender_type = 'visitor' ORDER BY id`;
  assert.deepEqual(stored.map((row) => row.content), texts);
});

Deno.test("a refused access token flags the channel and fails the message (4xx is not retried)", async () => {
  await using env = await setUp();
  const chat = await customerWrote(env);
  env.graph.queueMessageResponses({
    status: 401,
    body: env.graph.errorBody(190, "Error validating access token: Session has expired"),
  });
  const reply = await sendReply(env, chat.id, "Are you there?");
  assert.equal(reply.status, 200);
  const [channel] = await eventually(
    () => env.db.sql`SELECT attention_reason FROM whatsapp_channels`,
    ([row]) => row.attention_reason !== null,
    "the channel flagged",
  );
  assert.match(channel.attention_reason, /Session has expired \(code 190\)/);
  const [message] = await eventually(
    () =>
      env.db.sql`
        SELECT m.status, m.failure_code, o.state FROM messages m
        JOIN outbox o ON o.kind = 'whatsapp' AND (o.payload ->> 'message_id')::bigint = m.id
        WHERE m.id = ${reply.json.data.message_id}`,
    ([row]) => row?.status === "failed",
    "the message failed",
  );
  assert.equal(message.failure_code, 190);
  assert.notEqual(message.state, "pending");
  await new Promise((resolve) => setTimeout(resolve, 2_500)); // past the first retry's 2 s
  const sends = env.graph.calls.filter((call) =>
    call.method === "POST" && call.path.endsWith("/messages")
  );
  assert.equal(sends.length, 1, "sent once, not retried");
});

Deno.test("a template's quick-reply button drives the Flow like a reply button", async () => {
  await using env = await setUp();
  const flow = templateFlow(["yes", "no"], { yes: "great", no: "handoff" }, {
    great: { message: { message_type: "text", content: "Great, it ships today." } },
  });
  const { body, wamid } = await startFlow(env, flow, "Where is my order?");
  assert.equal((body as { type: string }).type, "template");
  const reply = replyTo(wamid, "wamid.template.reply", {
    type: "button",
    button: { payload: "yes", text: "Yes, please" },
  });
  assert.equal(await post(env, webhookBody([reply])), 200);
  await waitUntil(() => sends(env.graph).length === 2, "the next node sent");
  assert.deepEqual((sends(env.graph)[1].body as { text: unknown }).text, {
    body: "Great, it ships today.",
  });
  const [click] = await env.db.sql`SELECT content FROM messages WHERE external_id = ${reply.id}`;
  assert.equal(click.content, "Yes, please");
});

Deno.test("a username user is kept by their BSUID, linked to their number once shared, and answered by either", async () => {
  await using env = await setUp();
  const bsuid = "US.13491208655302741918";
  const ts = Math.floor(Date.now() / 1000);
  const hidden = whatsappWebhookBody(PHONE_NUMBER_ID, {
    contacts: [{ profile: { name: "Maria", username: "@maria" }, user_id: bsuid }],
    messages: [{
      from_user_id: bsuid,
      id: `wamid.bsuid.${crypto.randomUUID()}`,
      timestamp: String(ts),
      type: "text",
      text: { body: "Where is my order?" },
    }],
  });
  assert.equal(await post(env, hidden), 200);
  await processed(env);
  const [chat] = await env.db.sql`SELECT id FROM conversations`;
  assert.ok(chat, "the customer's message was lost");
  const reply = (content: string) =>
    apiCall(env.server.baseUrl, "/messages", {
      key: env.app.key,
      json: { chat_id: chat.id, content },
    });
  assert.equal((await reply("Let me check")).status, 200);
  await waitUntil(() => sends(env.graph).length === 1, "the reply sent to the BSUID");
  assert.deepEqual(sends(env.graph)[0].body, {
    messaging_product: "whatsapp",
    recipient_type: "individual",
    recipient: bsuid,
    type: "text",
    text: { body: "Let me check" },
  });

  // The same user, now with their phone number: one client, one conversation.
  const shared = whatsappWebhookBody(PHONE_NUMBER_ID, {
    contacts: [{ profile: { name: "Maria" }, wa_id: CUSTOMER, user_id: bsuid }],
    messages: [{ ...textMessage("It's order 42", ts + 1), from_user_id: bsuid }],
  });
  assert.equal(await post(env, shared), 200);
  await processed(env);
  assert.equal(await post(env, webhookBody([textMessage("Any news?", ts + 2)])), 200);
  await processed(env);
  const rows = await env.db.sql`
    SELECT cl.name, m.conversation_id, m.content FROM messages m
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    JOIN clients cl ON cl.app_id = c.app_id AND cl.id = c.client_id
    WHERE m.sender_type = 'visitor' ORDER BY m.id`;
  assert.deepEqual(rows.map((r) => `${r.conversation_id} ${r.name}: ${r.content}`), [
    `${chat.id} Maria: Where is my order?`,
    `${chat.id} Maria: It's order 42`,
    `${chat.id} Maria: Any news?`,
  ]);
  const identities = await env.db.sql`
    SELECT channel, external_id FROM client_identities ORDER BY channel`;
  assert.deepEqual(identities.map((r) => `${r.channel} ${r.external_id}`), [
    `whatsapp ${CUSTOMER}`,
    `whatsapp_user ${bsuid}`,
  ]);
  // Meta recommends the phone number where it is known.
  assert.equal((await reply("Shipped today")).status, 200);
  await waitUntil(() => sends(env.graph).length === 2, "the reply sent to the number");
  const second = sends(env.graph)[1].body as Record<string, unknown>;
  assert.equal(second.to, CUSTOMER);
  assert.equal("recipient" in second, false);
});

Deno.test("a phone customer's first message naming their BSUID too adds it to the same client", async () => {
  await using env = await setUp();
  const bsuid = "US.13491208655302741918";
  const ts = Math.floor(Date.now() / 1000);
  assert.equal(await post(env, webhookBody([textMessage("Hi", ts)])), 200);
  await processed(env);
  // In one delivery: with both ids, then by the BSUID alone.
  const body = whatsappWebhookBody(PHONE_NUMBER_ID, {
    contacts: [{ profile: { name: "Kerry Fisher" }, wa_id: CUSTOMER, user_id: bsuid }],
    messages: [
      { ...textMessage("with both", ts + 1), from_user_id: bsuid },
      { ...textMessage("hidden", ts + 2), from: undefined, from_user_id: bsuid },
    ],
  });
  assert.equal(await post(env, body), 200);
  await processed(env);
  const [counts] = await env.db.sql`
    SELECT (SELECT count(*) FROM clients)::int AS clients,
      (SELECT count(*) FROM conversations)::int AS conversations,
      (SELECT count(*) FROM messages)::int AS messages`;
  assert.deepEqual({ ...counts }, { clients: 1, conversations: 1, messages: 3 });
});

Deno.test("a customer's changed number (a system message) continues their client and conversation", async () => {
  await using env = await setUp();
  const ts = Math.floor(Date.now() / 1000);
  assert.equal(await post(env, webhookBody([textMessage("Hi, old phone", ts)])), 200);
  await processed(env);
  const NEW_NUMBER = "16505559999";
  // Meta sends no contacts with system messages.
  const system = {
    from: CUSTOMER,
    id: `wamid.system.${crypto.randomUUID()}`,
    timestamp: String(ts + 1),
    type: "system",
    system: {
      body: `User Kerry Fisher changed from ${CUSTOMER} to ${NEW_NUMBER}`,
      wa_id: NEW_NUMBER,
      type: "user_changed_number",
    },
  };
  assert.equal(await post(env, webhookBody([system], [], [])), 200);
  await processed(env);
  const next = webhookBody([textMessage("Hi, new phone", ts + 2, NEW_NUMBER)], [], [{
    profile: { name: "Kerry Fisher" },
    wa_id: NEW_NUMBER,
  }]);
  assert.equal(await post(env, next), 200);
  await processed(env);
  const rows = await env.db.sql`
    SELECT c.client_id, c.id AS chat, m.content FROM messages m
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    WHERE m.sender_type = 'visitor' ORDER BY m.id`;
  assert.deepEqual(rows.map((r) => r.content), ["Hi, old phone", "Hi, new phone"]);
  assert.equal(new Set(rows.map((r) => `${r.client_id}/${r.chat}`)).size, 1);
  // Replies go to the new number.
  const reply = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: rows[0].chat, content: "Noted" },
  });
  assert.equal(reply.status, 200);
  await waitUntil(() => sends(env.graph).length === 1, "the reply sent");
  assert.equal((sends(env.graph)[0].body as { to: string }).to, NEW_NUMBER);
});
