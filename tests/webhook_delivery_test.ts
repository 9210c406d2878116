import assert from "node:assert/strict";
import { Webhook } from "standardwebhooks";
import { createHmac } from "node:crypto";
import { createTestDatabase } from "./support/database.ts";
import { spawnServer, startTestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import { selfSignedCertificate } from "./support/tls.ts";
import { createVisitor, waitUntil } from "./support/realtime.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import {
  claimDueDeliveries,
  deleteOldAttempts,
  recordAttempts,
  retryDelivery,
} from "../src/db/deliveries.ts";
import type { Sql } from "../src/db/client.ts";
import { applyWhatsAppStatus } from "../src/db/whatsapp_inbound.ts";
import {
  deleteSlackMessage,
  editSlackMessage,
  hideSlackReplyFiles,
} from "../src/db/slack_inbound.ts";
import { appendVisitorMessages } from "../src/db/messages.ts";
import { appendReplies } from "../src/db/replies.ts";
import { closeConversation } from "../src/db/conversations.ts";

/** A request the receiver got. */
interface Received {
  headers: Headers;
  body: string;
}

/** A local HTTPS receiver answering with `respond` (default 200). */
async function startReceiver(
  respond: (n: number) => Response | Promise<Response> = () => new Response("ok"),
) {
  const { cert, key } = await selfSignedCertificate(["hooks.test"]);
  const caFile = await Deno.makeTempFile({ suffix: ".pem" });
  await Deno.writeTextFile(caFile, cert);
  const received: Received[] = [];
  const server = Deno.serve({
    port: 0,
    hostname: "127.0.0.1",
    cert,
    key,
    onListen: () => {},
  }, async (request) => {
    received.push({ headers: request.headers, body: await request.text() });
    return respond(received.length);
  });
  return {
    url: `https://127.0.0.1:${server.addr.port}/hooks/parley`,
    caFile,
    received,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      await Deno.remove(caFile);
    },
  };
}

/** The application's one delivery, once `ready` holds for it (polled, 10 s at most). */
async function settled(
  sql: Sql,
  appId: number,
  ready: (row: DeliveryRow) => boolean,
): Promise<DeliveryRow> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [row] = await sql<DeliveryRow[]>`
      SELECT id, state, attempts, last_error, run_at > now() AS later
      FROM outbox WHERE app_id = ${appId}`;
    if (row && ready(row)) return row;
    if (Date.now() > deadline) throw new Error(`Timed out: ${JSON.stringify(row)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface DeliveryRow {
  id: number;
  state: string;
  attempts: number;
  last_error: string | null;
  later: boolean;
}

/** An instance that may deliver to the loopback receiver and trusts its certificate. */
function startDeliveringServer(databaseUrl: string, caFile: string) {
  return startTestServer(databaseUrl, {
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "127.0.0.1/32",
    WEBHOOK_CA_FILE: caFile,
  });
}

async function subscribe(baseUrl: string, key: string, url: string, events: string[]) {
  const res = await apiCall(baseUrl, "/webhook", { method: "PUT", key, json: { url, events } });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json.data.secret as string;
}

Deno.test("a committed message is delivered once to the webhook, signed both ways", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver();
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  const secret = await subscribe(server.baseUrl, app.key, receiver.url, [
    "chat.started",
    "message.received",
    "message.sent",
  ]);
  const chat = await createVisitorChat(server.baseUrl, app.publicId, "Hello there");
  const reply = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content: "Hi!" },
  });
  await waitUntil(() => receiver.received.length >= 3, "three deliveries", 10_000);
  const events = receiver.received.map((r) => JSON.parse(r.body));
  assert.deepEqual(events.map((e) => e.type).sort(), [
    "chat.started",
    "message.received",
    "message.sent",
  ]);
  const sent = events.find((e) => e.type === "message.sent");
  assert.match(sent.id, /^evt_[0-9a-f]+$/);
  assert.equal(sent.app_id, app.appId);
  assert.match(sent.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  assert.equal(sent.data.conversation.id, chat.chatId);
  assert.equal(sent.data.message.id, reply.json.data.message_id);
  assert.equal(sent.data.message.content, "Hi!");
  assert.equal(sent.data.message.sender_type, "bot");

  for (const { headers, body } of receiver.received) {
    const id = JSON.parse(body).id;
    assert.equal(headers.get("content-type"), "application/json");
    assert.equal(headers.get("user-agent"), "Parley-Webhooks/1");
    assert.equal(headers.get("x-webhook-id"), id);
    const timestamp = headers.get("x-webhook-timestamp")!;
    assert.ok(Math.abs(Number(timestamp) - Date.now() / 1000) < 30);
    const expected = createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
    assert.equal(headers.get("x-webhook-signature"), `t=${timestamp},v1=${expected}`);
    // The unmodified Standard Webhooks library accepts the delivery as it arrived.
    const verified = new Webhook(secret).verify(body, {
      "webhook-id": headers.get("webhook-id")!,
      "webhook-timestamp": headers.get("webhook-timestamp")!,
      "webhook-signature": headers.get("webhook-signature")!,
    });
    assert.equal((verified as { id: string }).id, id);
  }
  // The receiver answered before each attempt was recorded: poll until all are.
  const deadline = Date.now() + 5_000;
  let rows;
  do {
    rows = await db.sql`SELECT state, attempts FROM outbox WHERE app_id = ${app.appId}`;
  } while (rows.some((r) => r.state === "pending") && Date.now() < deadline);
  assert.ok(rows.every((r) => r.state === "succeeded" && r.attempts === 1), JSON.stringify(rows));
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(receiver.received.length, 3, "delivered once each");
});

Deno.test("a failed attempt is recorded and retried; a redirect counts as a failure", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver((n) =>
    n === 1
      ? new Response("boom", { status: 500 })
      : n === 2
      ? new Response(null, { status: 302, headers: { location: "https://example.com/" } })
      : new Response("thanks")
  );
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  await waitUntil(() => receiver.received.length === 1, "the first attempt", 10_000);
  const pending = await settled(db.sql, app.appId, (row) => row.attempts === 1);
  assert.equal(pending.state, "pending");
  assert.equal(pending.last_error, "HTTP 500");
  assert.equal(pending.later, true, "scheduled about 5 s later");
  // The conversation changes before the retries: they still announce it as the event saw it.
  await db.sql`UPDATE conversations SET status = 'closed', closed_at = now()`;

  // Bring the retries forward instead of waiting out the schedule.
  for (const expected of [2, 3]) {
    // Only once the previous attempt is recorded: recording it sets run_at again.
    await settled(db.sql, app.appId, (row) => row.attempts === expected - 1);
    await db.sql`UPDATE outbox SET run_at = now() WHERE id = ${pending.id}`;
    await waitUntil(() => receiver.received.length === expected, `attempt ${expected}`, 10_000);
  }
  const done = await settled(db.sql, app.appId, (row) => row.state !== "pending");
  assert.deepEqual([done.state, done.attempts], ["succeeded", 3]);
  const attempts = await db.sql`
    SELECT status_code, error, response_excerpt FROM webhook_attempts
    WHERE outbox_id = ${pending.id} ORDER BY id`;
  assert.deepEqual(attempts.map((a) => ({ ...a })), [
    { status_code: 500, error: "HTTP 500", response_excerpt: "boom" },
    { status_code: 302, error: "redirect not followed (HTTP 302)", response_excerpt: "" },
    { status_code: 200, error: null, response_excerpt: "thanks" },
  ]);
  const bodies = new Set(receiver.received.map((r) => r.body));
  assert.equal(bodies.size, 1, "every attempt sends the first attempt's bytes");
  assert.equal(JSON.parse(receiver.received[2].body).data.conversation.status, "open");
});

Deno.test("disabling the webhook cancels pending deliveries", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver(() => new Response("down", { status: 503 }));
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  await waitUntil(() => receiver.received.length === 1, "the first attempt", 10_000);
  await settled(db.sql, app.appId, (row) => row.attempts === 1 && row.state === "pending");
  const configure = (enabled: boolean) =>
    apiCall(server.baseUrl, "/webhook", {
      method: "PUT",
      key: app.key,
      json: { url: receiver.url, events: ["message.received"], enabled },
    });
  assert.equal((await configure(false)).status, 200);
  // Cancelled by the change itself, not hours later at its next attempt.
  const [row] = await db.sql<DeliveryRow[]>`
    SELECT id, state, attempts, last_error, run_at > now() AS later
    FROM outbox WHERE app_id = ${app.appId}`;
  assert.equal(row.state, "failed");
  assert.match(row.last_error ?? "", /^cancelled: /);
  // The delivery log says why it stopped, after the attempt that failed (oldest first).
  const log = await apiCall(server.baseUrl, "/webhook/deliveries", { key: app.key });
  const [listed] = log.json.data;
  assert.equal(listed.status, "failed");
  assert.deepEqual(
    listed.attempts.map((attempt: { error: string | null }) => attempt.error),
    ["HTTP 503", "cancelled: the webhook is disabled or no longer subscribed"],
  );
  // Enabled again, the webhook does not send what was cancelled, even once due.
  assert.equal((await configure(true)).status, 200);
  await db.sql`UPDATE outbox SET run_at = now() WHERE app_id = ${app.appId}`;
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.equal(receiver.received.length, 1, "no attempt after disabling");
});

Deno.test("an attempt is logged at the time it began, its latency after", async () => {
  await using db = await createTestDatabase();
  let began = 0;
  await using receiver = await startReceiver(async () => {
    began = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    return new Response("slow but fine");
  });
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  await settled(db.sql, app.appId, (row) => row.state === "succeeded");
  const log = await apiCall(server.baseUrl, "/webhook/deliveries", { key: app.key });
  const [attempt] = log.json.data[0].attempts;
  assert.ok(attempt.latency_ms >= 1_000, `latency ${attempt.latency_ms} ms`);
  const logged = Date.parse(attempt.attempted_at);
  assert.ok(logged <= began + 50, `logged ${logged - began} ms after the receiver got it`);
});

Deno.test("the delivery log lists attempts newest first, and a retry runs a new attempt", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver((n) =>
    n === 1 ? new Response("nope", { status: 400 }) : new Response("fine")
  );
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql, "A");
  const other = await createKeyedApp(db.sql, "B");
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  const first = await settled(db.sql, app.appId, (row) => row.attempts === 1);

  const log = await apiCall(server.baseUrl, "/webhook/deliveries", { key: app.key });
  assert.equal(log.status, 200);
  assert.equal(log.json.data.length, 1);
  const [delivery] = log.json.data;
  assert.equal(delivery.id, first.id);
  assert.equal(delivery.type, "message.received");
  assert.equal(delivery.status, "pending");
  assert.equal(delivery.event_id, JSON.parse(receiver.received[0].body).id);
  assert.match(delivery.next_attempt_at, /Z$/);
  assert.equal(delivery.attempts.length, 1);
  assert.deepEqual(
    { ...delivery.attempts[0], attempted_at: undefined, latency_ms: undefined },
    {
      attempted_at: undefined,
      latency_ms: undefined,
      status_code: 400,
      error: "HTTP 400",
      response_excerpt: "nope",
    },
  );
  const none = await apiCall(server.baseUrl, "/webhook/deliveries?status=succeeded", {
    key: app.key,
  });
  assert.deepEqual(none.json.data, []);
  const bad = await apiCall(server.baseUrl, "/webhook/deliveries?status=done", { key: app.key });
  assert.deepEqual(bad.json, {
    code: 400,
    message: "status must be one of: pending, succeeded, failed",
  });
  const theirs = await apiCall(server.baseUrl, `/webhook/deliveries/${first.id}/retry`, {
    method: "POST",
    key: other.key,
  });
  assert.deepEqual(theirs.json, { code: 404, message: "Delivery not found" });
  const otherLog = await apiCall(server.baseUrl, "/webhook/deliveries", { key: other.key });
  assert.deepEqual(otherLog.json.data, []);

  const retried = await apiCall(server.baseUrl, `/webhook/deliveries/${first.id}/retry`, {
    method: "POST",
    key: app.key,
  });
  assert.deepEqual(retried.json, { code: 0, data: { id: first.id, status: "pending" } });
  const done = await settled(db.sql, app.appId, (row) => row.state === "succeeded");
  assert.equal(done.attempts, 2);
  const after = await apiCall(server.baseUrl, "/webhook/deliveries?status=succeeded", {
    key: app.key,
  });
  assert.equal(after.json.data[0].next_attempt_at, null);
  assert.deepEqual(
    after.json.data[0].attempts.map((a: { status_code: number }) => a.status_code),
    [400, 200],
  );
});

Deno.test("events acknowledged before a kill -9 are delivered after the restart", async () => {
  await using db = await createTestDatabase();
  let accepting = false;
  await using receiver = await startReceiver(() =>
    accepting ? new Response("ok") : new Response("later", { status: 503 })
  );
  const env = {
    DATABASE_URL: db.url,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "127.0.0.1/32",
    WEBHOOK_CA_FILE: receiver.caFile,
    LOG_LEVEL: "error",
  };
  const app = await createKeyedApp(db.sql);
  const first = await spawnServer(env);
  try {
    await subscribe(first.baseUrl, app.key, receiver.url, ["chat.started", "message.received"]);
    for (let i = 0; i < 5; i++) await createVisitorChat(first.baseUrl, app.publicId, `m${i}`);
  } finally {
    first.process.kill("SIGKILL");
    await first.process.status;
  }
  const [{ n }] = await db.sql`SELECT count(*)::int AS n FROM outbox WHERE app_id = ${app.appId}`;
  assert.equal(n, 10, "every acknowledged message queued its events");

  accepting = true;
  await using _restarted = await spawnServer(env);
  // Rows the killed process had claimed stay leased for a minute; do not wait it out.
  await db
    .sql`UPDATE outbox SET run_at = now(), claimed_until = NULL WHERE app_id = ${app.appId} AND state = 'pending'`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const [{ pending }] = await db.sql`
      SELECT count(*)::int AS pending FROM outbox
      WHERE app_id = ${app.appId} AND state <> 'succeeded'`;
    if (pending === 0) break;
    assert.ok(Date.now() < deadline, `${pending} deliveries still pending`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const delivered = new Set(
    receiver.received.filter((r) => r.body).map((r) => JSON.parse(r.body).id),
  );
  assert.equal(delivered.size, 10, "each of the ten events arrived at least once");
});

Deno.test("a batch that rolls back announces nothing", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.appId}, 'https://hooks.example.com/', '{chat.started,message.received}', true,
      'v1:x:y')`;
  const clientId = await createVisitor(db.sql, app.appId);
  await db.sql.unsafe(`
    CREATE FUNCTION refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'refused'; END $$;
    CREATE TRIGGER refuse_all BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse_all();`);
  await assert.rejects(
    commitBatch(db.sql, [
      { kind: "visitor.message", appId: app.appId, clientId, messageType: "text", content: "x" },
    ]),
    /refused/,
  );
  const [{ n }] = await db.sql`SELECT count(*)::int AS n FROM outbox`;
  assert.equal(n, 0);
});

Deno.test("the url is checked again at delivery: a name that now resolves privately is refused", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver();
  const port = new URL(receiver.url).port;
  await using server = await startTestServer(db.url, { WEBHOOK_CA_FILE: receiver.caFile }, {
    // Public when configured; loopback (where the receiver listens) when the delivery runs.
    resolveHost: (name) => Promise.resolve(name === "rebind.test" ? ["93.184.216.34"] : []),
    deliveryHosts: { "rebind.test": ["127.0.0.1"] },
  });
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, `https://rebind.test:${port}/in`, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  const row = await settled(db.sql, app.appId, (row) => row.attempts === 1);
  assert.equal(row.state, "pending", "retried later, in case DNS changes back");
  // The blocked address stays in the server's log: the tenant's log must not probe DNS.
  assert.equal(row.last_error, "refused by the SSRF guard");
  assert.equal(receiver.received.length, 0, "nothing reached the private address");
});

Deno.test("a 429 with Retry-After postpones the next attempt by at least what it asks", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver(() =>
    new Response("slow down", { status: 429, headers: { "retry-after": "120" } })
  );
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  const row = await settled(db.sql, app.appId, (row) => row.attempts === 1);
  assert.equal(row.last_error, "HTTP 429");
  const [{ wait }] = await db.sql`
    SELECT extract(epoch FROM run_at - now())::float8 AS wait FROM outbox WHERE id = ${row.id}`;
  assert.ok(wait > 110 && wait <= 121, `next attempt in ${wait} s`);
});

Deno.test("deleteOldAttempts() forgets finished deliveries and attempts after 14 days", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const insert = (state: string, daysAgo: number) =>
    db.sql`
      WITH o AS (
        INSERT INTO outbox (app_id, kind, topic, payload, state, created_at)
        VALUES (${app.appId}, 'webhook', 'message.sent', '{}', ${state},
          now() - make_interval(days => ${daysAgo}))
        RETURNING app_id, id
      )
      INSERT INTO webhook_attempts (app_id, outbox_id, latency_ms, attempted_at)
      SELECT app_id, id, 1, now() - make_interval(days => ${daysAgo}) FROM o`;
  await insert("succeeded", 15);
  await insert("failed", 15);
  await insert("succeeded", 13);
  await insert("pending", 15);
  // Created long ago, but retried by hand yesterday: its new attempt is kept, and so is it.
  await insert("failed", 20);
  await db.sql`INSERT INTO webhook_attempts (app_id, outbox_id, latency_ms, attempted_at)
    SELECT app_id, max(id), 1, now() - interval '1 day' FROM outbox GROUP BY app_id`;
  assert.equal(await deleteOldAttempts(db.sql), 2);
  const left = await db.sql`SELECT state FROM outbox ORDER BY id`;
  assert.deepEqual(left.map((r) => r.state), ["succeeded", "pending", "failed"]);
  const [{ n }] = await db.sql`SELECT count(*)::int AS n FROM webhook_attempts`;
  assert.equal(n, 2, "only recent attempts stay (old ones of kept deliveries go too)");
});

Deno.test("a receiver's answer holding a NUL byte is recorded, not lost with its batch", async () => {
  await using db = await createTestDatabase();
  await using receiver = await startReceiver(() => new Response("ok\u0000done"));
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  const row = await settled(db.sql, app.appId, (row) => row.state !== "pending");
  assert.equal(row.state, "succeeded");
  const [attempt] = await db.sql`SELECT response_excerpt FROM webhook_attempts`;
  assert.equal(attempt.response_excerpt, "ok\uFFFDdone");
});

Deno.test("a retry asked while an attempt is in flight neither doubles it nor undoes its outcome", async () => {
  await using db = await createTestDatabase();
  let answer!: () => void;
  await using receiver = await startReceiver(() =>
    new Promise<Response>((resolve) => answer = () => resolve(new Response("late but fine")))
  );
  await using server = await startDeliveringServer(db.url, receiver.caFile);
  const app = await createKeyedApp(db.sql);
  await subscribe(server.baseUrl, app.key, receiver.url, ["message.received"]);
  await createVisitorChat(server.baseUrl, app.publicId);
  await waitUntil(() => receiver.received.length === 1, "the attempt in flight", 10_000);
  const [{ id }] = await db.sql`SELECT id FROM outbox WHERE app_id = ${app.appId}`;
  const retried = await apiCall(server.baseUrl, `/webhook/deliveries/${id}/retry`, {
    method: "POST",
    key: app.key,
  });
  assert.equal(retried.status, 200);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(receiver.received.length, 1, "no second attempt while the first runs");
  answer();
  const row = await settled(db.sql, app.appId, (row) => row.state !== "pending");
  assert.deepEqual([row.state, row.attempts], ["succeeded", 1]);
});

Deno.test("a delivery carries the platform's error code and title, and every claim announces what the first one took", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const [client] = await db.sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${app.appId}, NULL) RETURNING id`;
  const [chat] = await db.sql<{ id: number }[]>`
    INSERT INTO conversations (app_id, client_id, channel, status)
    VALUES (${app.appId}, ${client.id}, 'whatsapp', 'open') RETURNING id`;
  const [message] = await db.sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, status,
      failure_code, failure_title)
    VALUES (${app.appId}, ${chat.id}, 'bot', 'text', 'hi', 'failed', 131047,
      'Re-engagement message')
    RETURNING id`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload)
    VALUES (${app.appId}, 'webhook', 'message.failed',
      ${db.sql.json({ conversation_id: chat.id, message_id: message.id })})`;
  const [claimed] = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  assert.equal(claimed.topic, "message.failed");
  assert.equal(claimed.context.message?.status, "failed");
  assert.deepEqual(claimed.context.message?.error, {
    code: 131047,
    title: "Re-engagement message",
  });

  // A deliverer that died mid-attempt: the next claim announces what the first one took, though
  // the conversation and message changed since.
  await db.sql`UPDATE conversations SET status = 'closed', closed_at = now() WHERE id = ${chat.id}`;
  await db.sql`UPDATE messages SET content = 'edited' WHERE id = ${message.id}`;
  await db.sql`UPDATE outbox SET claimed_until = now() - interval '1 second'`;
  const [again] = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  assert.equal(again.id, claimed.id);
  assert.deepEqual(again.context, claimed.context);
  assert.equal(again.context.conversation?.status, "open");
  assert.equal(again.context.message?.content, "hi");
});

Deno.test("receipts, edits and deletions announce the message as of their change, and a note's are not announced", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.appId}, 'https://example.com/h', '{message.updated,message.failed}', true, 'x')`;
  const [client] = await db.sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${app.appId}, NULL) RETURNING id`;
  const [chat] = await db.sql<{ id: number }[]>`
    INSERT INTO conversations (app_id, client_id, channel, status)
    VALUES (${app.appId}, ${client.id}, 'whatsapp', 'open') RETURNING id`;
  const insertMessage = async (senderType: string, content: string, internal = false) => {
    const [row] = await db.sql<{ id: number }[]>`
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, status,
        internal)
      VALUES (${app.appId}, ${chat.id}, ${senderType}, 'text', ${content}, 'sent', ${internal})
      RETURNING id`;
    return row.id;
  };
  const sent = await insertMessage("bot", "hi");
  await db.sql`INSERT INTO whatsapp_sent_parts (app_id, wamid, message_id, part, conversation_id)
    VALUES (${app.appId}, 'wamid.A', ${sent}, 0, ${chat.id})`;
  const receipt = (status: "delivered" | "read") => ({
    kind: "status" as const,
    phoneNumberId: "1",
    wamid: "wamid.A",
    status,
    timestamp: "1800000000",
    recipientId: null,
    error: null,
  });
  // Both receipts arrive before either event is delivered.
  assert.ok(await applyWhatsAppStatus(db.sql, app.appId, receipt("delivered")));
  assert.ok(await applyWhatsAppStatus(db.sql, app.appId, receipt("read")));

  const reply = await insertMessage("agent", "First");
  const note = await insertMessage("agent", "note: private", true);
  for (const [messageId, ts] of [[reply, "1.1"], [note, "1.2"]] as const) {
    await db.sql`INSERT INTO slack_messages (app_id, message_id, team_id, channel_id, ts)
      VALUES (${app.appId}, ${messageId}, 'T1', 'C1', ${ts})`;
  }
  const edit = (ts: string, text: string, internal = false) =>
    editSlackMessage(db.sql, app.appId, { teamId: "T1", channelId: "C1", ts, text, internal });
  assert.equal((await edit("1.1", "Second"))?.queuedEvents, 1);
  assert.equal((await edit("1.1", "Third"))?.queuedEvents, 1);
  assert.equal((await edit("1.2", "note: still private", true))?.queuedEvents, 0);
  // The reply's file, taken from the visitor as its text is made a note.
  const [file] = await db.sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, status)
    VALUES (${app.appId}, ${chat.id}, 'agent', 'file', 'invoice.pdf', 'sent') RETURNING id`;
  await db.sql`INSERT INTO slack_messages (app_id, message_id, team_id, channel_id, ts)
    VALUES (${app.appId}, ${file.id}, 'T1', 'C1', '1.1#1')`;
  const hidden = await hideSlackReplyFiles(db.sql, app.appId, {
    teamId: "T1",
    channelId: "C1",
    ts: "1.1",
  });
  assert.deepEqual(hidden, { hidden: [{ messageId: file.id, chatId: chat.id }], queuedEvents: 1 });
  const remove = (ts: string) =>
    deleteSlackMessage(db.sql, app.appId, { teamId: "T1", channelId: "C1", ts });
  // The text announced; its file, a note by now, not.
  assert.deepEqual((await remove("1.1")).map((one) => one.queuedEvents), [1, 0]);
  assert.deepEqual((await remove("1.2")).map((one) => one.queuedEvents), [0]);

  const claimed = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  const announced = claimed.sort((a, b) => a.id - b.id).map((delivery) => [
    delivery.topic,
    delivery.context.message?.id,
    delivery.context.message?.status,
    delivery.context.message?.content,
    delivery.context.message?.deleted,
  ]);
  assert.deepEqual(announced, [
    ["message.updated", sent, "delivered", "hi", undefined],
    ["message.updated", sent, "read", "hi", undefined],
    ["message.updated", reply, "sent", "Second", undefined],
    ["message.updated", reply, "sent", "Third", undefined],
    ["message.updated", file.id, "sent", "invoice.pdf", undefined],
    // Its deletion: announced as it read last, and gone.
    ["message.updated", reply, "sent", "Third", true],
  ]);
});

Deno.test("a backlog announces each conversation's status and activity as of its event", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.appId}, 'https://example.com/h',
      '{chat.started,message.received,chat.ended,message.sent}', true, 'x')`;
  const [client] = await db.sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${app.appId}, NULL) RETURNING id`;
  // Nothing is claimed until the chat has started, ended and been reopened by a reply.
  const { messages: [asked] } = await appendVisitorMessages(db.sql, [
    { appId: app.appId, clientId: client.id, messageType: "text", content: "Hello?" },
  ]);
  assert.ok(asked);
  assert.ok(await closeConversation(db.sql, app.appId, asked.chatId));
  const { replies: [answered] } = await appendReplies(db.sql, [{
    appId: app.appId,
    chatId: asked.chatId,
    senderType: "bot",
    senderName: null,
    messageType: "text",
    content: "Back again",
    payload: null,
  }]);
  assert.equal(answered.kind, "stored");
  const times = new Map(
    (await db.sql<{ id: number; at: string }[]>`
      SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at
      FROM messages WHERE app_id = ${app.appId}`).map((row) => [row.id, row.at]),
  );
  const askedAt = times.get(asked.messageId);
  const answeredAt = answered.kind === "stored" ? times.get(answered.messageId) : undefined;
  assert.ok(askedAt && answeredAt && askedAt < answeredAt);

  const claimed = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  const announced = claimed.sort((a, b) => a.id - b.id).map((delivery) => [
    delivery.topic,
    delivery.context.conversation?.status,
    delivery.context.conversation?.last_message_at,
  ]);
  assert.deepEqual(announced, [
    ["chat.started", "open", askedAt],
    ["message.received", "open", askedAt],
    ["chat.ended", "closed", askedAt],
    ["message.sent", "open", answeredAt],
  ]);
});

Deno.test("a retry asked during an attempt makes its failure due again at once, even the last", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const queue = () =>
    db.sql<{ id: number }[]>`
      INSERT INTO outbox (app_id, kind, topic, payload, attempts)
      VALUES (${app.appId}, 'webhook', 'message.sent', '{}', 7) RETURNING id`;
  const [first] = await queue();
  const [second] = await queue();
  const claimed = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  assert.equal(claimed.length, 2);
  // Retries asked while both attempts are in flight; the attempts then fail (the second one
  // after its last scheduled attempt) and one succeeds.
  assert.equal(await retryDelivery(db.sql, app.appId, first.id), true);
  const attempt = { statusCode: 500, latencyMs: 5, error: "HTTP 500", responseExcerpt: null };
  const byId = new Map(claimed.map((delivery) => [delivery.id, delivery]));
  await recordAttempts(db.sql, [
    {
      delivery: byId.get(first.id)!,
      attempt,
      outcome: { state: "pending", retryInMs: 3_600_000 },
    },
    { delivery: byId.get(second.id)!, attempt, outcome: { state: "failed" } },
  ]);
  const rows = await db.sql<{ id: number; state: string; due: boolean; asked: boolean }[]>`
    SELECT id, state, run_at <= clock_timestamp() AS due, retry_requested AS asked
    FROM outbox ORDER BY id`;
  assert.deepEqual(rows.map(({ id, state, asked }) => ({ id, state, asked })), [
    { id: first.id, state: "pending", asked: false },
    { id: second.id, state: "failed", asked: false },
  ]);
  assert.equal(rows[0].due, true, "due at once, not in an hour");
  // Asked during an attempt that then fails for good: one more attempt, at once.
  const [again] = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  assert.equal(again.id, first.id);
  assert.equal(await retryDelivery(db.sql, app.appId, first.id), true);
  await recordAttempts(db.sql, [{ delivery: again, attempt, outcome: { state: "failed" } }]);
  const [last] = await db.sql<{ state: string; due: boolean }[]>`
    SELECT state, run_at <= clock_timestamp() AS due FROM outbox WHERE id = ${first.id}`;
  assert.deepEqual({ ...last }, { state: "pending", due: true });
});

/** One claimed delivery of a new application, and a failed attempt's record of it. */
async function claimedAttemptRecord(sql: Sql) {
  const app = await createKeyedApp(sql);
  await sql`
    INSERT INTO outbox (app_id, kind, topic, payload)
    VALUES (${app.appId}, 'webhook', 'message.sent', '{}')`;
  const [delivery] = await claimDueDeliveries(sql, { limit: 10, leaseSeconds: 60 });
  const attempt = { statusCode: 500, latencyMs: 5, error: "HTTP 500", responseExcerpt: null };
  return { delivery, attempt, outcome: { state: "pending" as const, retryInMs: 5_000 } };
}

Deno.test("recording an attempt again (its answer lost) logs it once and moves nothing", async () => {
  await using db = await createTestDatabase();
  const record = await claimedAttemptRecord(db.sql);
  const { delivery } = record;
  await recordAttempts(db.sql, [record]);
  await recordAttempts(db.sql, [record]);
  const [logged] = await db.sql<{ count: number }[]>`
    SELECT count(*)::int AS count FROM webhook_attempts WHERE outbox_id = ${delivery.id}`;
  assert.equal(logged.count, 1);
  const [row] = await db.sql<{ attempts: number; state: string }[]>`
    SELECT attempts, state FROM outbox WHERE id = ${delivery.id}`;
  assert.deepEqual({ ...row }, { attempts: 1, state: "pending" });
  // The next claim's attempt is a new one.
  await db.sql`UPDATE outbox SET run_at = clock_timestamp() WHERE id = ${delivery.id}`;
  const [again] = await claimDueDeliveries(db.sql, { limit: 10, leaseSeconds: 60 });
  await recordAttempts(db.sql, [{ ...record, delivery: again }]);
  const [after] = await db.sql<{ count: number }[]>`
    SELECT count(*)::int AS count FROM webhook_attempts WHERE outbox_id = ${delivery.id}`;
  assert.equal(after.count, 2);
});

Deno.test("a second try of an attempt record that runs while the first is in flight logs it once", async () => {
  await using db = await createTestDatabase();
  const record = await claimedAttemptRecord(db.sql);
  const { delivery } = record;
  let second: Promise<void> | undefined;
  await db.sql.begin(async (tx) => {
    await recordAttempts(tx, [record]);
    // The first try has not committed yet: the second must wait for it, not add a row.
    second = recordAttempts(db.sql, [record]);
    await new Promise((resolve) => setTimeout(resolve, 200));
  });
  await second;
  const [logged] = await db.sql<{ count: number }[]>`
    SELECT count(*)::int AS count FROM webhook_attempts WHERE outbox_id = ${delivery.id}`;
  assert.equal(logged.count, 1);
  const [row] = await db.sql<{ attempts: number }[]>`
    SELECT attempts FROM outbox WHERE id = ${delivery.id}`;
  assert.equal(row.attempts, 1);
});
