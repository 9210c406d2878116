/**
 * A WhatsApp customer's swipe-to-reply, end to end: Meta's `context.id` names the quoted message,
 * the reply is stored with the message it quotes in its conversation, and its Slack post opens
 * with a line quoting that message. Likewise a first message sent from an ad: Meta's `referral`
 * is kept as the message's and its Slack post opens with the ad. Runs against the fake Graph
 * API and the fake Slack.
 */
import assert from "node:assert/strict";
import { createTestDatabase, type TestDatabase } from "./support/database.ts";
import { startTestServer, type TestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, type KeyedApp } from "./support/open_api.ts";
import { type FakeGraphApi, startFakeGraphApi } from "./support/fake_graph_api.ts";
import type { FakeSlack } from "./support/fake_slack.ts";
import {
  installSlack,
  slackServerEnv,
  startTestSlack,
  TEST_WORKSPACE,
} from "./support/slack_workspace.ts";
import { eventually } from "./support/eventually.ts";
import { whatsappWebhookBody } from "./support/whatsapp_webhook.ts";
import { configureWhatsApp, TEST_WHATSAPP } from "./support/whatsapp_channel.ts";
import { toMessage } from "../src/db/messages.ts";
import { metaSignature } from "../src/channels/whatsapp/signature.ts";
import { WITHDRAWN_ERROR } from "../src/db/channel_sends.ts";

const { phoneNumberId: PHONE_NUMBER_ID, accessToken: ACCESS_TOKEN, appSecret: APP_SECRET } =
  TEST_WHATSAPP;
const CUSTOMER = "16505551234";

interface Env extends AsyncDisposable {
  db: TestDatabase;
  graph: FakeGraphApi;
  slack: FakeSlack;
  server: TestServer;
  app: KeyedApp;
}

/** A server with WhatsApp configured and the application installed in the fake Slack. */
async function setUp(): Promise<Env> {
  const db = await createTestDatabase();
  const graph = await startFakeGraphApi({ accessToken: ACCESS_TOKEN });
  const slack = await startTestSlack();
  const server = await startTestServer(db.url, {
    WHATSAPP_GRAPH_URL: graph.url,
    ...slackServerEnv(slack),
  });
  const app = await createKeyedApp(db.sql);
  const env: Env = {
    db,
    graph,
    slack,
    server,
    app,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]();
      await slack[Symbol.asyncDispose]();
      await graph[Symbol.asyncDispose]();
      await db[Symbol.asyncDispose]();
    },
  };
  await configureWhatsApp(db.sql, app.appId);
  await installSlack(db.sql, server.baseUrl, slack, app.appId);
  return env;
}

/** Posts a signed webhook delivery of `messages` and waits until it is applied. */
async function deliver(env: Env, messages: unknown[]): Promise<void> {
  const contacts = [{ profile: { name: "Kerry Fisher" }, wa_id: CUSTOMER }];
  const raw = JSON.stringify(whatsappWebhookBody(PHONE_NUMBER_ID, { messages, contacts }));
  const res = await fetch(`${env.server.baseUrl}/api/v1/whatsapp/webhook/${env.app.appId}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-hub-signature-256": metaSignature(new TextEncoder().encode(raw), APP_SECRET),
    },
    body: raw,
  });
  await res.body?.cancel();
  assert.equal(res.status, 200);
  await eventually(
    () => env.db.sql`SELECT 1 FROM whatsapp_deliveries WHERE processed_at IS NULL`,
    (rows) => rows.length === 0,
    "the delivery applied",
  );
}

/** A customer's text message, replying to `quoted` (a wamid) when given. */
function text(id: string, body: string, quoted?: string) {
  return {
    from: CUSTOMER,
    id,
    timestamp: String(Math.floor(Date.now() / 1000)),
    type: "text",
    text: { body },
    ...(quoted === undefined ? {} : { context: { from: "15550783881", id: quoted } }),
  };
}

/** Posts a signed Slack `message` event (`event` adds to it) in the test channel; answered 200. */
async function postSlackMessage(env: Env, eventId: string, event: Record<string, unknown>) {
  const answered = await env.slack.postEvent(`${env.server.baseUrl}/api/v1/slack/events`, {
    type: "event_callback",
    team_id: TEST_WORKSPACE.teamId,
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
    event: { type: "message", channel: TEST_WORKSPACE.channelId, ...event },
  });
  await answered.body?.cancel();
  assert.equal(answered.status, 200);
}

/** The texts of the thread posts (not the root) mirrored so far. */
function threadTexts(slack: FakeSlack): string[] {
  return slack.calls
    .filter((call) => call.method === "chat.postMessage" && call.params.thread_ts !== undefined)
    .map((call) => String(call.params.text));
}

/** Waits until the thread holds as many posts as `expected`, then asserts their texts. */
async function assertThread(slack: FakeSlack, expected: string[]): Promise<void> {
  await eventually(
    () => Promise.resolve(threadTexts(slack)),
    (texts) => texts.length >= expected.length,
    "the thread mirrored",
  );
  assert.deepEqual(threadTexts(slack), expected);
}

Deno.test("a WhatsApp reply is stored with the message it quotes and posted in Slack under a line quoting it", async () => {
  await using env = await setUp();
  const { sql } = env.db;
  await deliver(env, [text("wamid.in.hello", "Hello")]);
  const [chat] = await sql`SELECT id FROM conversations`;
  const sent = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: chat.id, content: "Shall we ship it <today> & now?" },
  });
  assert.equal(sent.status, 200);
  const botId = sent.json.data.message_id;
  const [part] = await eventually(
    () => sql`SELECT wamid FROM whatsapp_sent_parts WHERE message_id = ${botId}`,
    (rows) => rows.length === 1,
    "the bot's message sent to WhatsApp",
  );
  // The customer swipes to reply to the bot's message, then to their own first message, then to
  // a message Parley never saw (a wamid of another business, or one long swept).
  await deliver(env, [
    text("wamid.in.yes", "yes", part.wamid),
    text("wamid.in.own", "as I said", "wamid.in.hello"),
    text("wamid.in.lost", "and this", "wamid.unknown"),
  ]);
  const rows = await sql`
    SELECT content, reply_to_message_id FROM messages
    WHERE sender_type = 'visitor' ORDER BY id`;
  const [hello] = await sql`SELECT id FROM messages WHERE external_id = 'wamid.in.hello'`;
  assert.deepEqual(rows.map((row) => [row.content, row.reply_to_message_id]), [
    ["Hello", null],
    ["yes", botId],
    ["as I said", hello.id],
    ["and this", null],
  ]);
  await assertThread(env.slack, [
    "Hello",
    "Shall we ship it &lt;today&gt; &amp; now?",
    "↩ Replying to Bot: “Shall we ship it &lt;today&gt; &amp; now?”\nyes",
    "↩ Replying to Kerry Fisher: “Hello”\nas I said",
    "and this",
  ]);
  const replyPost = env.slack.calls.find((call) =>
    call.method === "chat.postMessage" && String(call.params.text).endsWith("\nyes")
  )!;
  const blocks = replyPost.params.blocks as { type: string; elements?: { text: string }[] }[];
  assert.deepEqual(blocks[0], {
    type: "context",
    elements: [{
      type: "mrkdwn",
      text: "↩ Replying to Bot: “Shall we ship it &lt;today&gt; &amp; now?”",
      verbatim: true,
    }],
  });
  assert.equal(blocks.length, 2, "the context line and the reply, in one post");
});

Deno.test("a WhatsApp reply quotes a message applied together with it", async () => {
  await using env = await setUp();
  const { sql } = env.db;
  // A backlog applied at once: the customer's message and their reply to it in one delivery.
  await deliver(env, [
    text("wamid.in.first", "Do you ship to Lyon?"),
    text("wamid.in.again", "hello?", "wamid.in.first"),
  ]);
  const rows = await sql`
    SELECT id, content, reply_to_message_id FROM messages ORDER BY id`;
  assert.deepEqual(rows.map((row) => [row.content, row.reply_to_message_id]), [
    ["Do you ship to Lyon?", null],
    ["hello?", rows[0].id],
  ]);
  await assertThread(env.slack, [
    "Do you ship to Lyon?",
    "↩ Replying to Kerry Fisher: “Do you ship to Lyon?”\nhello?",
  ]);
});

Deno.test("a WhatsApp message sent from an ad keeps the ad and shows it in Slack and to webhooks", async () => {
  await using env = await setUp();
  const { sql } = env.db;
  const referral = {
    source_url: "https://fb.me/2ZulEu42P",
    source_id: "120226305854810726",
    source_type: "ad",
    headline: "Shoes & <more>",
    body: "Summer sale",
    media_type: "image",
    image_url: "https://scontent.xx.fbcdn.net/ad.png",
    ctwa_clid: "ARAkLkA8rmlFeiCktEJQ",
  };
  // A webhook the deliverer may not reach (a loopback address): its first claim keeps what the
  // event announces, which is all this test reads of it.
  await sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${env.app.appId}, 'https://127.0.0.1:9/h', '{message.received}', true, 'x')`;
  await deliver(env, [
    { ...text("wamid.in.ad", "Is this still on?"), referral },
    text("wamid.in.next", "size 42"),
  ]);
  const [chat] = await sql`SELECT id FROM conversations`;
  const history = await apiCall(env.server.baseUrl, `/conversations/${chat.id}/messages`, {
    key: env.app.key,
  });
  assert.equal(history.status, 200);
  const [first, second] = history.json.data;
  assert.deepEqual([first.message_type, first.content, first.referral], [
    "text",
    "Is this still on?",
    referral,
  ]);
  assert.equal("payload" in first, false, "a text message has no payload");
  assert.equal(second.content, "size 42");
  assert.equal("referral" in second, false, "a message not from an ad has no referral");
  const announced = await eventually(
    () => sql`SELECT snapshot FROM outbox WHERE topic = 'message.received' ORDER BY id`,
    (rows) => rows.length === 2 && rows.every((row) => row.snapshot !== null),
    "the webhook events claimed",
  );
  assert.deepEqual(
    announced.map((row) => toMessage(row.snapshot.message).referral),
    [referral, undefined],
  );
  await assertThread(env.slack, [
    "📣 From an ad: <https://fb.me/2ZulEu42P|“Shoes &amp; &lt;more&gt;”>\nIs this still on?",
    "size 42",
  ]);
});

Deno.test("a WhatsApp reply quotes only a message of its own conversation", async () => {
  await using env = await setUp();
  const { sql } = env.db;
  await deliver(env, [text("wamid.in.first", "first")]);
  // The conversation is closed: the customer's next message opens another one, and a reply to
  // the old conversation's message quotes nothing there.
  await sql`UPDATE conversations SET status = 'closed'`;
  await deliver(env, [text("wamid.in.later", "about that", "wamid.in.first")]);
  const rows = await sql`
    SELECT content, conversation_id, reply_to_message_id FROM messages ORDER BY id`;
  assert.equal(rows.length, 2);
  assert.notEqual(rows[1].conversation_id, rows[0].conversation_id);
  assert.equal(rows[1].reply_to_message_id, null);
});

Deno.test("a Slack reply to a WhatsApp customer whose 24-hour window closed is kept as a note, and its thread is told", async () => {
  await using env = await setUp();
  const hours25 = String(Math.floor(Date.now() / 1000) - 25 * 3600);
  await deliver(env, [{ ...text("wamid.OLD", "Anyone there?"), timestamp: hours25 }]);
  await assertThread(env.slack, ["Anyone there?"]);
  const [thread] = await env.db.sql`SELECT thread_ts FROM slack_threads`;
  await postSlackMessage(env, "EvLate", {
    thread_ts: thread.thread_ts,
    user: "U_AGENT",
    text: "Sorry for the wait",
    ts: "1800000100.000001",
  });
  // Nothing goes to WhatsApp, which would refuse it; under the reply, its thread says so.
  await assertThread(env.slack, [
    "Anyone there?",
    ":warning: Not delivered: Outside the 24-hour window: only template messages can be sent",
  ]);
  const stored = await env.db.sql`
    SELECT sender_type, content, internal, status, failure_code FROM messages
    WHERE sender_type = 'agent'`;
  assert.deepEqual(stored.map((row) => ({ ...row })), [{
    sender_type: "agent",
    content: "[Not delivered: outside WhatsApp's 24-hour window] Sorry for the wait",
    internal: true,
    status: "failed",
    failure_code: 131047,
  }]);
  assert.deepEqual(env.graph.calls.filter((call) => call.method === "POST"), []);
});

Deno.test("a Slack reply made a note or deleted while its WhatsApp send waits for a retry never leaves", async () => {
  await using env = await setUp();
  await deliver(env, [text("wamid.IN1", "Where is my refund?")]);
  await assertThread(env.slack, ["Where is my refund?"]);
  const [thread] = await env.db.sql`SELECT thread_ts FROM slack_threads`;
  // Meta is busy for the first attempt: the send waits 10 minutes for its retry, and the
  // customer's next sends wait behind it — until it is withdrawn, at once.
  env.graph.queueMessageResponses({
    status: 429,
    body: env.graph.errorBody(130429, "Rate limit hit"),
    headers: { "retry-after": "600" },
  });
  const reply = (ts: string, body: string) => ({
    user: "U_AGENT",
    text: body,
    ts,
    thread_ts: thread.thread_ts,
  });
  await postSlackMessage(env, "EvR1", reply("1800000200.000001", "Your refund code is SECRET-123"));
  await eventually(
    () => Promise.resolve(env.graph.calls.filter((call) => call.method === "POST").length),
    (count) => count === 1,
    "the first reply's refused attempt",
  );
  await postSlackMessage(env, "EvR1e", {
    subtype: "message_changed",
    message: {
      ...reply("1800000200.000001", "note: do not send the refund code yet"),
    },
  });
  await postSlackMessage(env, "EvR2", reply("1800000200.000002", "this one will be deleted"));
  await postSlackMessage(env, "EvR2d", {
    subtype: "message_deleted",
    deleted_ts: "1800000200.000002",
    previous_message: reply("1800000200.000002", "this one will be deleted"),
  });
  // Both sends come due again and end withdrawn; a later reply goes out alone.
  await postSlackMessage(env, "EvR3", reply("1800000200.000003", "We are on it"));
  await eventually(
    () => env.db.sql`SELECT state, last_error FROM outbox WHERE kind = 'whatsapp' ORDER BY id`,
    (rows) => rows.length === 3 && rows.every((row) => row.state !== "pending"),
    "the three sends settled",
    20_000,
  );
  const bodies = env.graph.calls
    .filter((call) => call.method === "POST")
    .map((call) => (call.body as { text: { body: string } }).text.body);
  assert.deepEqual(bodies, ["Your refund code is SECRET-123", "We are on it"]);
  const sends = await env.db.sql`
    SELECT state, last_error FROM outbox WHERE kind = 'whatsapp' ORDER BY id`;
  assert.deepEqual(sends.map((row) => ({ ...row })), [
    { state: "failed", last_error: WITHDRAWN_ERROR },
    { state: "failed", last_error: WITHDRAWN_ERROR },
    { state: "succeeded", last_error: null },
  ]);
  const stored = await env.db.sql`
    SELECT content, internal, deleted_at IS NOT NULL AS deleted, status FROM messages
    WHERE sender_type = 'agent' ORDER BY id`;
  assert.deepEqual(stored.map((row) => ({ ...row })), [
    {
      content: "note: do not send the refund code yet",
      internal: true,
      deleted: false,
      status: null,
    },
    { content: "this one will be deleted", internal: false, deleted: true, status: null },
    { content: "We are on it", internal: false, deleted: false, status: "sent" },
  ]);
  // No Not delivered line: nothing failed that the agent has to know of.
  assert.ok(!threadTexts(env.slack).some((line) => line.includes("Not delivered")));
});

Deno.test("a long Slack reply deleted after its first part reached WhatsApp sends no more and stays sent", async () => {
  await using env = await setUp();
  await deliver(env, [text("wamid.IN2", "Tell me everything")]);
  await assertThread(env.slack, ["Tell me everything"]);
  const [thread] = await env.db.sql`SELECT thread_ts FROM slack_threads`;
  env.graph.queueMessageResponses(
    {
      status: 200,
      body: {
        messaging_product: "whatsapp",
        contacts: [{ input: CUSTOMER, wa_id: CUSTOMER }],
        messages: [{ id: "wamid.PART1" }],
      },
    },
    {
      status: 429,
      body: env.graph.errorBody(130429, "Rate limit hit"),
      headers: { "retry-after": "600" },
    },
  );
  const reply = { user: "U_AGENT", text: "a".repeat(5_000), ts: "1800000300.000001" };
  await postSlackMessage(env, "EvL1", { ...reply, thread_ts: thread.thread_ts });
  await eventually(
    () => env.db.sql`SELECT last_error FROM outbox WHERE kind = 'whatsapp'`,
    (rows) => rows[0]?.last_error?.includes("Rate limit hit"),
    "the second part refused",
  );
  await postSlackMessage(env, "EvL2", {
    subtype: "message_deleted",
    deleted_ts: reply.ts,
    previous_message: reply,
  });
  const [send] = await eventually(
    () => env.db.sql`SELECT state, last_error FROM outbox WHERE kind = 'whatsapp'`,
    (rows) => rows[0]?.state === "failed",
    "the send withdrawn at once",
  );
  assert.equal(send.last_error, WITHDRAWN_ERROR);
  const [message] = await env.db.sql`SELECT status FROM messages WHERE sender_type = 'agent'`;
  assert.equal(message.status, "sent", "its first part left: its receipts are to come");
  assert.equal(env.graph.calls.filter((call) => call.method === "POST").length, 2);
});
