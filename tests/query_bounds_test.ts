/**
 * Queries read what they answer, not the history kept: each test builds a history the query must
 * not read and counts, from PostgreSQL's statistics, the rows and index entries it read.
 */
import assert from "node:assert/strict";
import type { Sql } from "../src/db/client.ts";
import { claimChannelSends } from "../src/db/channel_sends.ts";
import { sweepChannelRecords } from "../src/db/channel_sweep.ts";
import { listConversations } from "../src/db/conversations.ts";
import { deleteOldAttempts } from "../src/db/deliveries.ts";
import { listClientMessagesSince, readClientChangesSince } from "../src/db/realtime.ts";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";
import { tuplesRead } from "./support/tuples_read.ts";

/** `count` clients of the application, each with one conversation of `status`. */
async function conversations(
  sql: Sql,
  appId: number,
  count: number,
  status: "open" | "closed",
): Promise<{ clientId: number; chatId: number }[]> {
  return await sql<{ clientId: number; chatId: number }[]>`
    WITH c AS (
      INSERT INTO clients (app_id, name) SELECT ${appId}, 'c' || n FROM generate_series(1, ${count}) n
      RETURNING id
    )
    INSERT INTO conversations (app_id, client_id, channel, status, last_message_at)
    SELECT ${appId}, c.id, 'whatsapp', ${status}, clock_timestamp() - interval '1 day'
    FROM c
    RETURNING client_id AS "clientId", id AS "chatId"`;
}

Deno.test("a WhatsApp send's claim finds its customer without reading the application's other customers", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  const chats = await conversations(db.sql, app, 3_000, "open");
  await db.sql`
    INSERT INTO client_identities (app_id, channel, external_id, client_id)
    SELECT ${app}, 'whatsapp', '4915' || client_id, client_id
    FROM unnest(${chats.map((c) => c.clientId)}::bigint[]) AS client_id`;
  const [chat] = chats.slice(-1);
  const [message] = await db.sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, status)
    VALUES (${app}, ${chat.chatId}, 'bot', 'text', 'hi', 'pending') RETURNING id`;
  await db.sql`INSERT INTO outbox (app_id, kind, topic, payload) VALUES (${app}, 'whatsapp',
    'message', ${db.sql.json({ conversation_id: chat.chatId, message_id: message.id })})`;
  await db.sql`ANALYZE`;
  const read = await tuplesRead(db.sql, { table: "client_identities" }, async (sql) => {
    const claimed = await claimChannelSends(sql, { kind: "whatsapp", limit: 8, leaseSeconds: 60 });
    assert.deepEqual(claimed.rows[0]?.recipient, { kind: "phone", id: `4915${chat.clientId}` });
  });
  assert.ok(read < 50, `the claim read ${read} identities`);
});

Deno.test("a page of open conversations does not read past the closed ones, and both statuses merge in order", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  const open = await conversations(db.sql, app, 5, "open");
  await conversations(db.sql, app, 3_000, "closed");
  // The open ones are the oldest activity: a listing by activity alone read every closed one.
  await db.sql`UPDATE conversations SET last_message_at = last_message_at - interval '1 day'
    WHERE id = ANY (${open.map((c) => c.chatId)}::bigint[])`;
  await db.sql`ANALYZE conversations`;
  const read = await tuplesRead(db.sql, { table: "conversations" }, async (sql) => {
    const page = await listConversations(sql, app, { status: "open", limit: 20 });
    assert.equal(page.length, 5);
  });
  assert.ok(read < 50, `the page read ${read} conversations`);

  const both = await listConversations(db.sql, app, { limit: 3_010 });
  assert.equal(both.length, 3_005);
  for (let i = 1; i < both.length; i++) {
    const [a, b] = [both[i - 1], both[i]];
    assert.ok(
      a.last_message_at > b.last_message_at ||
        (a.last_message_at === b.last_message_at && a.id > b.id),
      `in order at ${i}`,
    );
  }
  assert.deepEqual(both.slice(-5).map((c) => c.status), ["open", "open", "open", "open", "open"]);
});

Deno.test("the sweeps read only what is old enough to delete", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, state)
    SELECT ${app}, kind, 'message', '{}', 'succeeded'
    FROM generate_series(1, 2000) n, unnest('{webhook,whatsapp,slack}'::text[]) kind`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, state, created_at)
    VALUES (${app}, 'webhook', 'message.sent', '{}', 'succeeded', now() - interval '15 days'),
      (${app}, 'slack', 'message', '{}', 'failed', now() - interval '15 days')`;
  await db.sql`
    INSERT INTO whatsapp_deliveries (app_id, body, processed_at)
    SELECT ${app}, '\\x00', now() - CASE WHEN n = 1 THEN interval '15 days' ELSE '0' END
    FROM generate_series(1, 3000) n`;
  await db.sql`
    INSERT INTO slack_deliveries (kind, body, processed_at)
    SELECT 'event', '\\x00', now() - CASE WHEN n = 1 THEN interval '15 days' ELSE '0' END
    FROM generate_series(1, 3000) n`;
  await db.sql`ANALYZE`;
  for (const table of ["outbox", "whatsapp_deliveries", "slack_deliveries"]) {
    const read = await tuplesRead(db.sql, { table }, async (sql) => {
      if (table === "outbox") assert.equal(await deleteOldAttempts(sql), 1);
      assert.equal(await sweepChannelRecords(sql), table === "outbox" ? 3 : 0);
    });
    assert.ok(read < 100, `the sweeps read ${read} rows of ${table}`);
  }
});

Deno.test("a replay after a reconnection reads only the conversations with activity since", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  const chats = await conversations(db.sql, app, 1_000, "open");
  // Ten old messages in every conversation, and one new one in the last.
  await db.sql`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, created_at)
    SELECT ${app}, chat_id, 'visitor', 'text', 'old', now() - interval '1 day'
    FROM unnest(${chats.map((c) => c.chatId)}::bigint[]) chat_id, generate_series(1, 10)`;
  const since = new Date();
  const [last] = chats.slice(-1);
  await db.sql`
    WITH m AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content)
      VALUES (${app}, ${last.chatId}, 'bot', 'text', 'new') RETURNING created_at
    )
    UPDATE conversations SET last_message_at = (SELECT created_at FROM m)
    WHERE app_id = ${app} AND id = ${last.chatId}`;
  await db.sql`ANALYZE`;
  const read = await tuplesRead(db.sql, { table: "messages" }, async (sql) => {
    const missed = await listClientMessagesSince(
      sql,
      chats.map((c) => ({ appId: app, clientId: c.clientId })),
      since,
    );
    assert.deepEqual(missed.map((m) => m.message.content), ["new"]);
  });
  assert.ok(read < 100, `the replay read ${read} messages`);
});

Deno.test("a replay reads each watched client's conversations, not the whole table", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  await conversations(db.sql, app, 20_000, "closed");
  const watched = await conversations(db.sql, app, 2_000, "open");
  const since = new Date();
  await db.sql`UPDATE conversations SET last_message_at = clock_timestamp()
    WHERE app_id = ${app} AND id = ${watched[0].chatId}`;
  await db.sql`VACUUM ANALYZE conversations`;
  const read = await tuplesRead(db.sql, { table: "conversations" }, async (sql) => {
    const changes = await readClientChangesSince(
      sql,
      watched.map((c) => ({ appId: app, clientId: c.clientId })),
      since,
    );
    assert.deepEqual(changes.conversations.map((c) => c.chat.id), [watched[0].chatId]);
  });
  // Two probes of the watched clients (their conversations, their messages), none of the rest.
  assert.ok(read < 10_000, `the replay read ${read} conversations`);
});
