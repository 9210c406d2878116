import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { startPgProxy } from "./support/pg_proxy.ts";
import { connect, type Sql } from "../src/db/client.ts";
import { sweepCommitMarks } from "../src/db/commit_outcome.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { insertApplication } from "../src/db/applications.ts";
import { CHANGES_CHANNEL, decodeChangeNotice } from "../src/domain/change_notice.ts";
import type {
  CommandResult,
  SendReplyCommand,
  SlackChange,
  WhatsAppInboundEntry,
} from "../src/actors/protocol.ts";
import { parseFlow } from "../src/domain/flow.ts";

/** A visitor (Ann) of application `appId` who said "hi": their conversation and message. */
async function visitorChat(
  sql: Sql,
  appId: number,
): Promise<{ chatId: number; messageId: number }> {
  const [created] = await commitBatch(sql, [
    { kind: "visitor.create", appId, tokenHash: "h1", name: "Ann", email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const [sent] = await commitBatch(sql, [
    { kind: "visitor.message", appId, clientId, messageType: "text", content: "hi" },
  ]);
  const { chat_id: chatId, message_id: messageId } = value<
    { chat_id: number; message_id: number }
  >(sent);
  return { chatId, messageId };
}

/** The bot's text reply to conversation `chatId`, with Idempotency-Key `key` unless null. */
function keyedReply(
  appId: number,
  chatId: number,
  content: string,
  key: string | null,
): SendReplyCommand {
  return {
    kind: "chat.reply",
    appId,
    chatId,
    senderType: "bot",
    senderName: null,
    messageType: "text",
    content,
    payload: null,
    ...(key === null ? {} : { idempotency: { key, fingerprint: `fp:${chatId}:${content}` } }),
  };
}

function value<T>(result: CommandResult): T {
  assert.equal(result.ok, true, JSON.stringify(result));
  return (result as { value: T }).value;
}

Deno.test("commitBatch opens a conversation on a visitor's first message and reuses it", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: "Ann", email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const send = { kind: "visitor.message", appId: app.id, clientId, messageType: "text" } as const;
  const results = await commitBatch(db.sql, [
    { ...send, content: "one" },
    { ...send, content: "two" },
  ]);
  const [first, second] = results.map((r) => value<{ chat_id: number; message_id: number }>(r));
  assert.equal(first.chat_id, second.chat_id);
  assert.ok(second.message_id > first.message_id);
  const [chat] = await db.sql`
    SELECT c.status, c.last_message_at, c.last_inbound_at, m.created_at AS last_created
    FROM conversations c JOIN messages m ON m.app_id = c.app_id AND m.id = ${second.message_id}
    WHERE c.id = ${first.chat_id}`;
  assert.equal(chat.status, "open");
  assert.equal(chat.last_message_at, chat.last_created);
  assert.equal(chat.last_inbound_at, chat.last_created);
});

Deno.test("commitBatch starts a new conversation after the open one is closed", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const send = { kind: "visitor.message", appId: app.id, clientId, messageType: "text" } as const;
  const [a] = await commitBatch(db.sql, [{ ...send, content: "hello" }]);
  const chatA = value<{ chat_id: number }>(a).chat_id;
  const [closed, again, b] = await commitBatch(db.sql, [
    { kind: "chat.close", appId: app.id, chatId: chatA },
    { kind: "chat.close", appId: app.id, chatId: chatA },
    { ...send, content: "back again" },
  ]);
  assert.equal(value<{ status: string }>(closed).status, "closed");
  assert.equal(value<{ status: string }>(again).status, "closed");
  assert.notEqual(value<{ chat_id: number }>(b).chat_id, chatA);
});

Deno.test("commitBatch answers 404 for another application's conversation or client", async () => {
  await using db = await createTestDatabase();
  const a = await insertApplication(db.sql, "A");
  const b = await insertApplication(db.sql, "B");
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: a.id, tokenHash: "h", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const [sent] = await commitBatch(db.sql, [
    { kind: "visitor.message", appId: a.id, clientId, messageType: "text", content: "hi" },
  ]);
  const chatId = value<{ chat_id: number }>(sent).chat_id;
  const results = await commitBatch(db.sql, [
    { kind: "chat.close", appId: b.id, chatId },
    { kind: "visitor.message", appId: b.id, clientId, messageType: "text", content: "x" },
  ]);
  assert.deepEqual(results, [
    { ok: false, status: 404, message: "Conversation not found" },
    { ok: false, status: 404, message: "Visitor not found" },
  ]);
  const [row] = await db.sql`SELECT status FROM conversations WHERE id = ${chatId}`;
  assert.equal(row.status, "open");
});

Deno.test("commitBatch queues webhook events only for subscribed applications", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const quiet = await insertApplication(db.sql, "Quiet");
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.id}, 'https://example.com/h', '{chat.started,message.received,chat.ended}',
      true, 'x')`;
  const [c1, c2] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "a", name: null, email: null },
    { kind: "visitor.create", appId: quiet.id, tokenHash: "b", name: null, email: null },
  ]);
  const [m1] = await commitBatch(db.sql, [
    {
      kind: "visitor.message",
      appId: app.id,
      clientId: value<{ client_id: number }>(c1).client_id,
      messageType: "text",
      content: "hi",
    },
    {
      kind: "visitor.message",
      appId: quiet.id,
      clientId: value<{ client_id: number }>(c2).client_id,
      messageType: "text",
      content: "hi",
    },
  ]);
  await commitBatch(db.sql, [
    { kind: "chat.close", appId: app.id, chatId: value<{ chat_id: number }>(m1).chat_id },
  ]);
  const rows = await db.sql`SELECT app_id, topic FROM outbox ORDER BY id`;
  assert.deepEqual(rows.map((r) => [r.app_id, r.topic]), [
    [app.id, "chat.started"],
    [app.id, "message.received"],
    [app.id, "chat.ended"],
  ]);
});

Deno.test("commitBatch announces created messages and changed chats with one notice", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const notices: string[] = [];
  const listening = await db.sql.listen(CHANGES_CHANNEL, (payload) => notices.push(payload));
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const send = { kind: "visitor.message", appId: app.id, clientId, messageType: "text" } as const;
  const results = await commitBatch(db.sql, [{ ...send, content: "1" }, { ...send, content: "2" }]);
  const ids = results.map((r) => value<{ message_id: number; chat_id: number }>(r));
  for (let i = 0; i < 50 && notices.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  await listening.unlisten();
  assert.equal(notices.length, 1);
  assert.deepEqual(decodeChangeNotice(notices[0]), {
    a: [app.id],
    m: [ids[0].message_id, ids[1].message_id],
    c: [[app.id, ids[0].chat_id]],
  });
});

Deno.test("commitBatch rolls back the whole batch when a statement fails", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  await assert.rejects(commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "same", name: null, email: null },
    { kind: "visitor.create", appId: app.id, tokenHash: "same", name: null, email: null },
  ]));
  const [row] = await db.sql`SELECT count(*) AS n FROM clients`;
  assert.equal(row.n, 0);
});

Deno.test("commitBatch stores a batch of many visitors' messages in input order", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const created = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "a", name: null, email: null },
    { kind: "visitor.create", appId: app.id, tokenHash: "b", name: null, email: null },
    { kind: "visitor.create", appId: other.id, tokenHash: "c", name: null, email: null },
  ]);
  const [a, b, c] = created.map((r) => value<{ client_id: number }>(r).client_id);
  const send = (appId: number, clientId: number, content: string) =>
    ({ kind: "visitor.message", appId, clientId, messageType: "text", content }) as const;
  const results = await commitBatch(db.sql, [
    send(app.id, a, "a1"),
    send(app.id, b, "b1"),
    send(other.id, a, "not a's app"), // a is not a client of `other`
    send(app.id, a, "a2"),
    send(other.id, c, "c1"),
    send(app.id, b, "b2"),
  ]);
  assert.deepEqual(results[2], { ok: false, status: 404, message: "Visitor not found" });
  const ok = results.map((r) => r.ok ? (r.value as { chat_id: number; message_id: number }) : null);
  assert.equal(ok[0]!.chat_id, ok[3]!.chat_id);
  assert.equal(ok[1]!.chat_id, ok[5]!.chat_id);
  assert.notEqual(ok[0]!.chat_id, ok[1]!.chat_id);
  const ids = [0, 1, 3, 4, 5].map((i) => ok[i]!.message_id);
  assert.deepEqual(ids, [...ids].sort((x, y) => x - y), "ids follow input order");
  const rows = await db.sql`SELECT id, content FROM messages ORDER BY id`;
  assert.deepEqual(rows.map((r) => r.content), ["a1", "b1", "a2", "c1", "b2"]);
  assert.deepEqual(rows.map((r) => r.id), ids);
});

Deno.test("commitBatch announces chat.started once for a new conversation's first message", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.id}, 'https://example.com/h', '{chat.started,message.received}', true, 'x')`;
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "a", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const send = { kind: "visitor.message", appId: app.id, clientId, messageType: "text" } as const;
  const [first, second] = await commitBatch(db.sql, [
    { ...send, content: "1" },
    { ...send, content: "2" },
  ]);
  const m1 = value<{ message_id: number }>(first).message_id;
  const m2 = value<{ message_id: number }>(second).message_id;
  const rows = await db
    .sql`SELECT topic, payload->>'message_id' AS message_id FROM outbox ORDER BY id`;
  assert.deepEqual(rows.map((r) => [r.topic, Number(r.message_id)]), [
    ["chat.started", m1],
    ["message.received", m1],
    ["message.received", m2],
  ]);
});

Deno.test("commitBatch marks the notice of a batch that queued webhook events, and only that", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  await db.sql`
    INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.id}, 'https://hooks.example.com/', '{chat.ended}', true, 'unused')`;
  const notices: string[] = [];
  const listening = await db.sql.listen(CHANGES_CHANNEL, (payload) => notices.push(payload));
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const [sent] = await commitBatch(db.sql, [
    { kind: "visitor.message", appId: app.id, clientId, messageType: "text", content: "hi" },
  ]);
  const chatId = value<{ chat_id: number }>(sent).chat_id;
  await commitBatch(db.sql, [{ kind: "chat.close", appId: app.id, chatId }]);
  for (let i = 0; i < 50 && notices.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  await listening.unlisten();
  // The message queued nothing (chat.started and message.received are not subscribed); the
  // close queued chat.ended.
  assert.deepEqual(notices.map((notice) => decodeChangeNotice(notice)?.w), [undefined, 1]);
});

Deno.test("commitBatch keeps a WhatsApp user met by phone number and by BSUID one client with one conversation", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "A");
  // A known customer, by number and BSUID, without an open conversation.
  const [known] = await db.sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${app.id}, 'Kim') RETURNING id`;
  await db.sql`
    INSERT INTO client_identities (app_id, channel, external_id, client_id)
    VALUES (${app.id}, 'whatsapp', '333', ${known.id}),
      (${app.id}, 'whatsapp_user', 'US.3', ${known.id})`;
  const [delivery] = await db.sql<{ id: number }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body) VALUES (${app.id}, '\\x00') RETURNING id`;
  const text = (waId: string | null, userId: string | null, wamid: string) => ({
    kind: "message" as const,
    waId,
    userId,
    name: null,
    wamid,
    timestamp: "2026-11-20T10:00:00Z",
    messageType: "text" as const,
    content: wamid,
    payload: null,
  });
  const [result] = await commitBatch(db.sql, [{
    kind: "whatsapp.inbound",
    appId: app.id,
    deliveryId: delivery.id,
    entries: [
      // A new user, with both ids and then by the BSUID alone.
      text("111", "US.1", "w1"),
      text(null, "US.1", "w2"),
      // The known one, once by each id.
      text("333", null, "w3"),
      text(null, "US.3", "w4"),
    ],
  }]);
  assert.equal(value<{ applied: number }>(result).applied, 4);
  const rows = await db.sql<{ content: string; client_id: number; chat: number }[]>`
    SELECT m.content, c.client_id, c.id AS chat FROM messages m
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id ORDER BY m.id`;
  assert.equal(rows[0].chat, rows[1].chat);
  assert.equal(rows[2].chat, rows[3].chat);
  assert.notEqual(rows[0].chat, rows[2].chat);
  assert.equal(rows[2].client_id, known.id);
  const identities = await db.sql<{ channel: string; external_id: string; client_id: number }[]>`
    SELECT channel, external_id, client_id FROM client_identities ORDER BY external_id`;
  assert.deepEqual(identities.map((i) => [i.channel, i.external_id, i.client_id]), [
    ["whatsapp", "111", rows[0].client_id],
    ["whatsapp", "333", known.id],
    ["whatsapp_user", "US.1", rows[0].client_id],
    ["whatsapp_user", "US.3", known.id],
  ]);
});

Deno.test("commitBatch applies consecutive WhatsApp deliveries together, each wamid once", async () => {
  await using db = await createTestDatabase();
  const a = await insertApplication(db.sql, "A");
  const b = await insertApplication(db.sql, "B");
  // A known customer without a name, with an open conversation.
  const [known] = await db.sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${a.id}, NULL) RETURNING id`;
  await db.sql`
    INSERT INTO client_identities (app_id, channel, external_id, client_id)
    VALUES (${a.id}, 'whatsapp', '111', ${known.id})`;
  const [open] = await db.sql<{ id: number }[]>`
    INSERT INTO conversations (app_id, client_id, channel, status, last_inbound_at)
    VALUES (${a.id}, ${known.id}, 'whatsapp', 'open', '2026-11-01T00:00:00Z') RETURNING id`;
  const deliveries = await db.sql<{ id: number }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body)
    VALUES (${a.id}, '\\x00'), (${a.id}, '\\x00'), (${b.id}, '\\x00') RETURNING id`;
  const text = (waId: string, name: string | null, wamid: string, timestamp: string) => ({
    kind: "message" as const,
    waId,
    userId: null,
    name,
    wamid,
    timestamp,
    messageType: "text" as const,
    content: `text of ${wamid}`,
    payload: null,
  });
  const results = await commitBatch(db.sql, [
    {
      kind: "whatsapp.inbound",
      appId: a.id,
      deliveryId: deliveries[0].id,
      entries: [
        text("222", null, "w1", "2026-11-20T10:00:00Z"),
        text("111", "Kim", "w2", "2026-11-20T10:00:01Z"),
        text("222", "Lee", "w3", "2026-11-20T10:00:02Z"),
      ],
    },
    {
      kind: "whatsapp.inbound",
      appId: a.id,
      deliveryId: deliveries[1].id,
      // w2 again (Meta's retry of an update), then a new message of the same customer.
      entries: [
        text("111", "Other", "w2", "2026-11-20T10:00:01Z"),
        text("111", null, "w4", "2026-11-20T10:00:05Z"),
      ],
    },
    {
      kind: "whatsapp.inbound",
      appId: b.id,
      deliveryId: deliveries[2].id,
      // The same customer and wamid in another application are another client and message.
      entries: [text("222", "Lee", "w1", "2026-11-20T10:00:03Z")],
    },
  ]);
  assert.deepEqual(results.map((r) => value<{ applied: number }>(r).applied), [3, 1, 1]);
  const messages = await db.sql<
    { app_id: number; external_id: string; conversation_id: number; platform_timestamp: string }[]
  >`
    SELECT app_id, external_id, conversation_id, platform_timestamp FROM messages ORDER BY id`;
  assert.deepEqual(messages.map((m) => [m.app_id, m.external_id]), [
    [a.id, "w1"],
    [a.id, "w2"],
    [a.id, "w3"],
    [a.id, "w4"],
    [b.id, "w1"],
  ]);
  const [w1, w2, w3, w4, otherW1] = messages;
  assert.equal(w2.conversation_id, open.id);
  assert.equal(w4.conversation_id, open.id);
  assert.equal(w1.conversation_id, w3.conversation_id);
  assert.notEqual(w1.conversation_id, open.id);
  assert.notEqual(otherW1.conversation_id, w1.conversation_id);
  assert.equal(w1.platform_timestamp, "2026-11-20T10:00:00.000000Z");
  const clients = await db.sql<{ app_id: number; external_id: string; name: string | null }[]>`
    SELECT i.app_id, i.external_id, c.name FROM client_identities i
    JOIN clients c ON c.app_id = i.app_id AND c.id = i.client_id
    ORDER BY i.app_id, i.external_id`;
  // A profile name fills an empty one: the first name a customer's new messages carry.
  assert.deepEqual(clients.map((c) => [c.app_id, c.external_id, c.name]), [
    [a.id, "111", "Kim"],
    [a.id, "222", "Lee"],
    [b.id, "222", "Lee"],
  ]);
  const chats = await db.sql<{ id: number; last_inbound_at: string }[]>`
    SELECT id, last_inbound_at FROM conversations WHERE app_id = ${a.id} ORDER BY id`;
  assert.deepEqual(chats.map((c) => [c.id, c.last_inbound_at]), [
    [open.id, "2026-11-20T10:00:05.000000Z"],
    [w1.conversation_id, "2026-11-20T10:00:02.000000Z"],
  ]);
  const pending = await db.sql`SELECT id FROM whatsapp_deliveries WHERE processed_at IS NULL`;
  assert.equal(pending.length, 0);
});

Deno.test("commitBatch applies consecutive Slack events together, each event and message once", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const { chatId, messageId } = await visitorChat(db.sql, app.id);
  // A Slack message already mirrored (the visitor's, posted by Parley).
  await db.sql`
    INSERT INTO slack_messages (app_id, message_id, team_id, channel_id, ts)
    VALUES (${app.id}, ${messageId}, 'T1', 'C1', '100.1')`;
  const deliveries = await db.sql<{ id: number }[]>`
    INSERT INTO slack_deliveries (kind, body)
    SELECT 'event', '\\x00' FROM generate_series(1, 6) RETURNING id`;
  const reply = (ts: string, text: string, files: { id: string }[] = []) => ({
    kind: "reply" as const,
    chatId,
    senderName: "Sam",
    text,
    internal: false,
    files: files.map((file) => ({
      id: file.id,
      url: `https://parley.test/media/${file.id}`,
      filename: `${file.id}.png`,
      mimeType: "image/png",
      image: true,
    })),
    channelId: "C1",
    ts,
  });
  const event = (index: number, eventId: string, change: ReturnType<typeof reply> | null) => ({
    kind: "slack.event" as const,
    appId: app.id,
    teamId: "T1",
    eventId,
    deliveryId: deliveries[index].id,
    change,
  });
  const results = await commitBatch(db.sql, [
    event(0, "Ev1", reply("200.1", "first")),
    event(1, "Ev1", reply("200.1", "first")), // Slack's retry of Ev1
    event(2, "Ev2", reply("200.1", "first")), // another event for the same message
    event(3, "Ev3", reply("100.1", "echo")), // Parley's own post
    event(4, "Ev4", null),
    event(5, "Ev5", reply("300.1", "", [{ id: "F1" }, { id: "F2" }])),
  ]);
  assert.ok(results.every((result) => result.ok));
  const replies = await db.sql<{ id: number; message_type: string; content: string }[]>`
    SELECT id, message_type, content FROM messages
    WHERE app_id = ${app.id} AND sender_type = 'agent' ORDER BY id`;
  assert.deepEqual(replies.map((r) => r.message_type), ["text", "image", "image"]);
  assert.equal(replies[0].content, "first");
  const mirrored = await db.sql<{ message_id: number; ts: string }[]>`
    SELECT message_id, ts FROM slack_messages WHERE app_id = ${app.id} AND ts <> '100.1'
    ORDER BY message_id`;
  assert.deepEqual(mirrored.map((m) => [m.message_id, m.ts]), [
    [replies[0].id, "200.1"],
    [replies[1].id, "300.1"],
    [replies[2].id, "300.1#1"],
  ]);
  const media = await db.sql`
    SELECT media_id FROM channel_media WHERE channel = 'slack' ORDER BY media_id`;
  assert.deepEqual(media.map((m) => m.media_id), ["F1", "F2"]);
  const claimed = await db.sql`SELECT event_id FROM slack_events ORDER BY event_id`;
  assert.deepEqual(claimed.map((e) => e.event_id), ["Ev1", "Ev2", "Ev3", "Ev4", "Ev5"]);
  const pending = await db.sql`SELECT id FROM slack_deliveries WHERE processed_at IS NULL`;
  assert.equal(pending.length, 0);
});

Deno.test("commitBatch: a reply's edit or deletion applied before Slack's retry of the reply wins, in one batch or across two", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const { chatId } = await visitorChat(db.sql, app.id);
  const deliveries = await db.sql<{ id: number }[]>`
    INSERT INTO slack_deliveries (kind, body)
    SELECT 'event', '\\x00' FROM generate_series(1, 10) RETURNING id`;
  const from = { chatId, senderName: "Sam", files: [] };
  const reply = (ts: string, text: string): SlackChange => ({
    kind: "reply",
    ...from,
    text,
    internal: false,
    channelId: "C1",
    ts,
  });
  const edit = (ts: string, text: string): SlackChange => ({
    kind: "edit",
    channelId: "C1",
    ts,
    text,
    internal: false,
    reply: { ...from, mayStore: true },
  });
  const deletion = (ts: string): SlackChange => ({ kind: "delete", channelId: "C1", ts });
  const event = (index: number, change: SlackChange) => ({
    kind: "slack.event" as const,
    appId: app.id,
    teamId: "T1",
    eventId: `Ev${index}`,
    deliveryId: deliveries[index].id,
    change,
  });
  const agentTexts = async () =>
    (await db.sql<{ content: string; deleted: boolean }[]>`
      SELECT content, deleted_at IS NOT NULL AS deleted FROM messages
      WHERE app_id = ${app.id} AND sender_type = 'agent' ORDER BY id`)
      .map((row) => `${row.content}${row.deleted ? " (deleted)" : ""}`);
  // In one batch: each change comes before the reply it changes; an edit that leaves nothing to
  // store (no text, no files) stores nothing and leaves the reply to its retry.
  let results = await commitBatch(db.sql, [
    event(0, edit("200.1", "edited")),
    event(1, reply("200.1", "original")),
    event(2, deletion("300.1")),
    event(3, reply("300.1", "deleted one")),
    event(8, edit("600.1", " ")),
    event(9, reply("600.1", "kept")),
  ]);
  assert.ok(results.every((result) => result.ok));
  assert.deepEqual(await agentTexts(), ["edited", "kept"]);
  // Across batches, as when Slack's retry comes minutes later.
  results = await commitBatch(db.sql, [event(4, edit("400.1", "edited later"))]);
  results.push(...await commitBatch(db.sql, [event(5, deletion("500.1"))]));
  results.push(...await commitBatch(db.sql, [event(6, reply("400.1", "original"))]));
  results.push(...await commitBatch(db.sql, [event(7, reply("500.1", "deleted one"))]));
  assert.ok(results.every((result) => result.ok));
  assert.deepEqual(await agentTexts(), ["edited", "kept", "edited later"]);
  const mirrored = await db.sql`SELECT ts FROM slack_messages ORDER BY ts`;
  assert.deepEqual(mirrored.map((row) => row.ts), ["200.1", "400.1", "600.1"]);
});

Deno.test("a batch whose statements fail after the first rolls back and leaves no rejection unhandled", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const [delivery] = await db.sql<{ id: number }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body) VALUES (${app.id}, '\\x00') RETURNING id`;
  // A message PostgreSQL refuses (text cannot hold NUL): its statement fails, and so does every
  // statement sent after it in the aborted transaction (the mark of the delivery) — an unhandled
  // one would fail this test, as it took an actor worker down.
  await assert.rejects(commitBatch(db.sql, [{
    kind: "whatsapp.inbound",
    appId: app.id,
    deliveryId: delivery.id,
    entries: [{
      kind: "message",
      waId: "111",
      userId: null,
      name: null,
      wamid: "w1",
      timestamp: "2026-11-20T10:00:00Z",
      messageType: "text",
      content: "a\u0000b",
      payload: null,
    }],
  }]));
  await new Promise((resolve) => setTimeout(resolve, 50)); // any stray rejection surfaces here
  // This test's database only: other files run beside it.
  const [idle] = await db.sql`
    SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE state = 'idle in transaction' AND datname = current_database()`;
  assert.equal(idle.n, 0);
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: null, email: null },
  ]);
  assert.equal(created.ok, true);
});

Deno.test("commitBatch starts a conversation with the Flow in force at its command, even one the batch set", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const flowSaying = (content: string) =>
    parseFlow({ start: "hi", nodes: { hi: { message: { message_type: "text", content } } } });
  const visitors = await commitBatch(
    db.sql,
    ["a", "b", "c"].map((hash) => ({
      kind: "visitor.create" as const,
      appId: app.id,
      tokenHash: hash,
      name: null,
      email: null,
    })),
  );
  const [a, b, c] = visitors.map((result) => value<{ client_id: number }>(result).client_id);
  const send = (clientId: number) =>
    ({
      kind: "visitor.message",
      appId: app.id,
      clientId,
      messageType: "text",
      content: "?",
    }) as const;
  await commitBatch(db.sql, [
    send(a),
    { kind: "flow.set", appId: app.id, flow: flowSaying("first Flow") },
    send(b),
    { kind: "flow.set", appId: app.id, flow: null },
    send(c),
  ]);
  const rows = await db.sql<{ client_id: number; content: string }[]>`
    SELECT c.client_id, m.content FROM messages m
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    WHERE m.sender_type = 'flow' ORDER BY m.id`;
  assert.deepEqual(rows.map((row) => [row.client_id, row.content]), [[b, "first Flow"]]);
});

Deno.test("commitBatch lets a command behind a Flow step of its conversation see that step", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const [created, otherCreated] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "a", name: null, email: null },
    { kind: "visitor.create", appId: other.id, tokenHash: "b", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  const otherClient = value<{ client_id: number }>(otherCreated).client_id;
  const send = (appId: number, clientId: number, content: string) =>
    ({ kind: "visitor.message", appId, clientId, messageType: "text", content }) as const;
  const closing = parseFlow({
    start: "bye",
    nodes: { bye: { message: { message_type: "text", content: "Closed today" }, then: "close" } },
  });
  const [set, one, between, two] = await commitBatch(db.sql, [
    { kind: "flow.set", appId: app.id, flow: closing },
    send(app.id, clientId, "one"),
    send(other.id, otherClient, "elsewhere"),
    send(app.id, clientId, "two"),
  ]);
  assert.equal(set.ok, true);
  const first = value<{ chat_id: number }>(one).chat_id;
  const second = value<{ chat_id: number }>(two).chat_id;
  assert.notEqual(
    second,
    first,
    "the Flow closed the first conversation before the second message",
  );
  assert.equal(between.ok, true);
  const rows = await db.sql<{ conversation_id: number; sender_type: string; content: string }[]>`
    SELECT conversation_id, sender_type, content FROM messages WHERE app_id = ${app.id} ORDER BY id`;
  assert.deepEqual(rows.map((row) => [Number(row.conversation_id), row.sender_type, row.content]), [
    [first, "visitor", "one"],
    [first, "flow", "Closed today"],
    [second, "visitor", "two"],
    [second, "flow", "Closed today"],
  ]);
  const chats = await db.sql<{ status: string }[]>`
    SELECT status FROM conversations WHERE app_id = ${app.id} ORDER BY id`;
  assert.deepEqual(chats.map((chat) => chat.status), ["closed", "closed"]);

  const welcome = parseFlow({
    start: "hi",
    nodes: { hi: { message: { message_type: "text", content: "Welcome" } } },
  });
  await commitBatch(db.sql, [{ kind: "flow.set", appId: app.id, flow: welcome }]);
  const [three, four] = await commitBatch(db.sql, [
    send(app.id, clientId, "three"),
    send(app.id, clientId, "four"),
  ]);
  const third = value<{ chat_id: number }>(three).chat_id;
  assert.equal(value<{ chat_id: number }>(four).chat_id, third);
  const ordered = await db.sql<{ content: string }[]>`
    SELECT content FROM messages WHERE conversation_id = ${third} ORDER BY id`;
  assert.deepEqual(ordered.map((row) => row.content), ["three", "Welcome", "four"]);
});

Deno.test("commitBatch applies a WhatsApp delivery's updates after the Flow steps of those before them", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const deliveries = await db.sql<{ id: number }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body)
    SELECT ${app.id}, '\\x00' FROM generate_series(1, 4) RETURNING id`;
  const text = (waId: string, wamid: string, content: string) => ({
    kind: "message" as const,
    waId,
    userId: null,
    name: null,
    wamid,
    // Now: the Flow's answers are free-form messages, sent only within 24 hours.
    timestamp: new Date().toISOString(),
    messageType: "text" as const,
    content,
    payload: null,
  });
  const delivery = (index: number, entries: WhatsAppInboundEntry[]) => ({
    kind: "whatsapp.inbound" as const,
    appId: app.id,
    deliveryId: deliveries[index].id,
    entries,
  });
  const conversationOf = async (wamid: string) => {
    const [row] = await db.sql<{ conversation_id: number }[]>`
      SELECT conversation_id FROM messages WHERE app_id = ${app.id} AND external_id = ${wamid}`;
    return Number(row.conversation_id);
  };
  const contentsOf = async (chatId: number) =>
    (await db.sql<{ content: string }[]>`
      SELECT content FROM messages WHERE conversation_id = ${chatId} ORDER BY id`)
      .map((row) => row.content);
  const statusOf = async (chatId: number) =>
    (await db.sql`SELECT status FROM conversations WHERE id = ${chatId}`)[0].status;

  // A click and a message behind it in one delivery: the message sees the conversation closed.
  await commitBatch(db.sql, [{
    kind: "flow.set",
    appId: app.id,
    flow: parseFlow({
      start: "welcome",
      nodes: {
        welcome: {
          message: {
            message_type: "buttons",
            content: { text: "Hi!", buttons: [{ id: "bye", title: "Bye" }] },
          },
          on: { bye: "farewell" },
        },
        farewell: { message: { message_type: "text", content: "Bye!" }, then: "close" },
      },
    }),
  }]);
  await commitBatch(db.sql, [delivery(0, [text("111", "w1", "hi")])]);
  const first = await conversationOf("w1");
  const [welcome] = await db.sql<{ id: number }[]>`
    SELECT id FROM messages WHERE conversation_id = ${first} AND sender_type = 'flow'`;
  const [clicked] = await commitBatch(db.sql, [delivery(1, [
    {
      kind: "click",
      waId: "111",
      userId: null,
      name: null,
      wamid: "w2",
      timestamp: new Date().toISOString(),
      chatId: first,
      messageId: Number(welcome.id),
      actionId: "bye",
      title: "Bye",
    },
    text("111", "w3", "one more thing"),
  ])]);
  assert.equal(value<{ applied: number }>(clicked).applied, 2);
  assert.deepEqual(await contentsOf(first), [
    "hi",
    JSON.stringify({ text: "Hi!", buttons: [{ id: "bye", title: "Bye" }] }),
    "Bye",
    "Bye!",
  ]);
  assert.equal(await statusOf(first), "closed");
  const next = await conversationOf("w3");
  assert.notEqual(next, first, "the message behind the click opened a new conversation");
  assert.equal((await contentsOf(next))[0], "one more thing");

  // Two messages of a new customer in one delivery, with a Flow that closes at its start.
  await commitBatch(db.sql, [{
    kind: "flow.set",
    appId: app.id,
    flow: parseFlow({
      start: "shut",
      nodes: {
        shut: { message: { message_type: "text", content: "Closed today" }, then: "close" },
      },
    }),
  }]);
  const [both] = await commitBatch(db.sql, [
    delivery(2, [text("222", "w4", "a"), text("222", "w5", "b")]),
  ]);
  assert.equal(value<{ applied: number }>(both).applied, 2);
  const [a, b] = [await conversationOf("w4"), await conversationOf("w5")];
  assert.notEqual(b, a);
  assert.deepEqual([await contentsOf(a), await contentsOf(b)], [
    ["a", "Closed today"],
    ["b", "Closed today"],
  ]);
  // The first part of a delivery leaves it to be marked by the rest, should that never commit.
  await commitBatch(db.sql, [{ ...delivery(3, [text("222", "w6", "c")]), partial: true }]);
  const pending = await db.sql`SELECT id FROM whatsapp_deliveries WHERE processed_at IS NULL`;
  assert.deepEqual(pending.map((row) => row.id), [deliveries[3].id]);
});

Deno.test("commitBatch cuts a batch once at every Flow step it must wait for, not again per cut", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  await commitBatch(db.sql, [{
    kind: "flow.set",
    appId: app.id,
    flow: parseFlow({
      start: "hi",
      nodes: { hi: { message: { message_type: "text", content: "Welcome" } } },
    }),
  }]);
  const customers = 16;
  const deliveries = await db.sql<{ id: number }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body)
    SELECT ${app.id}, '\\x00' FROM generate_series(1, ${customers}) RETURNING id`;
  const text = (waId: string, content: string) => ({
    kind: "message" as const,
    waId,
    userId: null,
    name: null,
    wamid: `${waId}-${content}`,
    timestamp: new Date().toISOString(),
    messageType: "text" as const,
    content,
    payload: null,
  });
  // Each delivery: a new customer's first two messages; each first one starts the Flow.
  const commands = deliveries.map((delivery, i) => ({
    kind: "whatsapp.inbound" as const,
    appId: app.id,
    deliveryId: delivery.id,
    entries: [text(`c${i}`, "hi"), text(`c${i}`, "help")],
  }));
  let transactions = 0;
  const counting = new Proxy(db.sql, {
    get(target, key, receiver) {
      if (key === "reserve") transactions++;
      return Reflect.get(target, key, receiver);
    },
  });
  const results = await commitBatch(counting, commands);
  assert.deepEqual(
    results.map((r) => value<{ applied: number }>(r).applied),
    commands.map(() => 2),
  );
  // The batch, then one segment per cut and the first: not a batch again behind every cut.
  assert.equal(transactions, customers + 2);
  const rows = await db.sql<{ wa: string; contents: string[] }[]>`
    SELECT i.external_id AS wa, array_agg(m.content ORDER BY m.id) AS contents
    FROM messages m JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    JOIN client_identities i ON i.app_id = c.app_id AND i.client_id = c.client_id
    GROUP BY i.external_id`;
  assert.equal(rows.length, customers);
  for (const row of rows) assert.deepEqual(row.contents, ["hi", "Welcome", "help"], row.wa);
  const pending = await db.sql`SELECT id FROM whatsapp_deliveries WHERE processed_at IS NULL`;
  assert.equal(pending.length, 0);
});

Deno.test("a batch whose COMMIT took effect but whose answer was lost is answered, not committed twice", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: null, email: null },
  ]);
  const clientId = value<{ client_id: number }>(created).client_id;
  // The connection is lost once, right after the server got the batch's COMMIT.
  const proxy = startPgProxy(
    db.url,
    (text, broken) => broken === 0 && text.includes("COMMIT") ? "pass-then-cut" : "pass",
  );
  const sql = connect(proxy.url, { max: 2 });
  try {
    const send = { kind: "visitor.message", appId: app.id, clientId, messageType: "text" } as const;
    const results = await commitBatch(sql, [
      { ...send, content: "one" },
      { ...send, content: "two" },
    ]);
    assert.equal(proxy.broken, 1);
    const ids = results.map((result) => value<{ message_id: number }>(result).message_id);
    const stored = await db.sql`SELECT id, content FROM messages ORDER BY id`;
    assert.deepEqual(stored.map((row) => [row.id, row.content]), [
      [ids[0], "one"],
      [ids[1], "two"],
    ]);
    // The pool goes on without the lost connection.
    const [again] = await commitBatch(sql, [{ ...send, content: "three" }]);
    assert.equal(value<{ message_id: number }>(again).message_id, ids[1] + 1);
  } finally {
    await sql.end({ timeout: 1 });
    proxy.close();
  }
});

Deno.test("a batch whose COMMIT never reached the server still fails, to be tried again", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  // The connection ends as the COMMIT leaves: the server never sees it, and rolls back.
  const proxy = startPgProxy(
    db.url,
    (text, broken) => broken === 0 && text.includes("COMMIT") ? "terminate" : "pass",
  );
  const sql = connect(proxy.url, { max: 2 });
  try {
    await assert.rejects(commitBatch(sql, [
      { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: null, email: null },
    ]));
    assert.equal(proxy.broken, 1);
    const [{ n }] = await db.sql`SELECT count(*)::int AS n FROM clients`;
    assert.equal(n, 0);
  } finally {
    await sql.end({ timeout: 1 });
    proxy.close();
  }
});

Deno.test("a batch marks its transaction in its session's row, and marks idle for an hour are swept", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: null, email: null },
  ]);
  const marks = await db.sql`SELECT pid FROM commit_marks`;
  assert.equal(marks.length, 1, "one session wrote");
  await db
    .sql`INSERT INTO commit_marks (pid, xid, at) VALUES (-1, '5', now() - interval '2 hours')`;
  assert.equal(await sweepCommitMarks(db.sql), 1);
  assert.deepEqual(
    (await db.sql`SELECT pid FROM commit_marks`).map((row) => row.pid),
    [marks[0].pid],
  );
});

Deno.test("commitBatch stores one reply per Idempotency-Key, in one batch or across its steps", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const { chatId } = await visitorChat(db.sql, app.id);
  const reply = (content: string, key: string | null, chat = chatId) =>
    keyedReply(app.id, chat, content, key);
  const results = await commitBatch(db.sql, [
    reply("one", "k1"),
    reply("one", "k1"), // the same request twice in a batch: the first one's message
    reply("other", "k1"), // the key asked something else
    reply("lost", "k2", chatId + 1000), // stores nothing: its key is given back
    reply("found", "k2"), // came at the same instant as the one that failed
    reply("plain", null),
    { kind: "chat.close", appId: app.id, chatId },
    reply("one", "k1"), // a later step of the batch sees the first step's key
    reply("three", "k3"),
  ]);
  const first = value<{ message_id: number }>(results[0]).message_id;
  assert.deepEqual(results.slice(1), [
    { ok: true, value: { message_id: first }, replayed: true },
    {
      ok: false,
      status: 422,
      message: "Idempotency-Key was already used for a different request",
    },
    { ok: false, status: 404, message: "Conversation not found" },
    { ok: false, status: 409, message: "A request with the same Idempotency-Key is in progress" },
    results[5],
    results[6],
    { ok: true, value: { message_id: first }, replayed: true },
    results[8],
  ]);
  const third = value<{ message_id: number }>(results[8]).message_id;
  const messages = await db.sql`
    SELECT content FROM messages WHERE sender_type = 'bot' ORDER BY id`;
  assert.deepEqual(messages.map((m) => m.content), ["one", "plain", "three"]);
  const keys = await db.sql`SELECT key, message_id FROM idempotency_keys ORDER BY key`;
  assert.deepEqual(keys.map((k) => ({ ...k })), [
    { key: "k1", message_id: first },
    { key: "k3", message_id: third },
  ]);
  // The freed key stores its message in a later batch.
  const [retried] = await commitBatch(db.sql, [reply("found", "k2")]);
  assert.equal(retried.ok, true);
  assert.equal((retried as { replayed?: true }).replayed, undefined);
});

Deno.test("commitBatch answers a duplicate key from the batch as it stood at the duplicate, not from later commands", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const { chatId } = await visitorChat(db.sql, app.id);
  const reply = (content: string, chat: number) => keyedReply(app.id, chat, content, "k");
  const results = await commitBatch(db.sql, [
    reply("x", chatId + 1000),
    reply("x", chatId + 1000),
    { kind: "chat.close", appId: app.id, chatId },
    reply("y", chatId),
  ]);
  assert.deepEqual(results.slice(0, 2), [
    { ok: false, status: 404, message: "Conversation not found" },
    { ok: false, status: 409, message: "A request with the same Idempotency-Key is in progress" },
  ]);
  assert.equal(results[3].ok, true);
  assert.equal((results[3] as { replayed?: true }).replayed, undefined);
});
