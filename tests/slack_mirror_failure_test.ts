import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";
import type { Sql } from "../src/db/client.ts";
import { applyWhatsAppStatus } from "../src/db/whatsapp_inbound.ts";
import { recordSendOutcome } from "../src/db/channel_sends.ts";

/** A WhatsApp conversation with two bot messages, the first already posted in Slack. */
async function mirroredConversation(sql: Sql, appId: number) {
  const [client] = await sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${appId}, 'Ana') RETURNING id`;
  const [chat] = await sql<{ id: number }[]>`
    INSERT INTO conversations (app_id, client_id, channel, status)
    VALUES (${appId}, ${client.id}, 'whatsapp', 'open') RETURNING id`;
  const messages = await sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, status)
    VALUES (${appId}, ${chat.id}, 'bot', 'text', 'posted', 'sent'),
      (${appId}, ${chat.id}, 'bot', 'text', 'not posted yet', 'sent')
    RETURNING id`;
  const [posted, unposted] = messages.map((row) => row.id);
  await sql`INSERT INTO slack_messages (app_id, message_id, team_id, channel_id, ts)
    VALUES (${appId}, ${posted}, 'T1', 'C1', '1800000000.000001')`;
  return { chatId: chat.id, posted, unposted };
}

/** A WhatsApp send of the message, claimed, then refused for good. */
async function failSend(sql: Sql, appId: number, chatId: number, messageId: number) {
  const [send] = await sql<{ id: number; claimed_at: string }[]>`
    INSERT INTO outbox (app_id, kind, topic, payload, claimed_at, claimed_until)
    VALUES (${appId}, 'whatsapp', 'send',
      ${sql.json({ conversation_id: chatId, message_id: messageId })},
      clock_timestamp(), clock_timestamp() + interval '2 minutes')
    RETURNING id, claimed_at::text`;
  await recordSendOutcome(sql, {
    appId,
    id: send.id,
    claimedAt: send.claimed_at,
    messageId,
    chatId,
  }, { state: "failed", error: "(#131026) Message undeliverable", code: 131026 });
}

/** The Slack mirror rows queued, as `conversation:message`. */
async function mirrorsQueued(sql: Sql, appId: number): Promise<string[]> {
  const rows = await sql`
    SELECT payload ->> 'conversation_id' AS chat, payload ->> 'message_id' AS message FROM outbox
    WHERE app_id = ${appId} AND kind = 'slack' AND topic = 'message' ORDER BY id`;
  return rows.map((row) => `${row.chat}:${row.message}`);
}

Deno.test("a failed receipt for a message already in Slack queues its Not delivered line", async () => {
  await using db = await createTestDatabase();
  const { appId } = await createKeyedApp(db.sql);
  const { chatId, posted, unposted } = await mirroredConversation(db.sql, appId);
  await db.sql`INSERT INTO whatsapp_sent_parts (app_id, wamid, message_id, part, conversation_id)
    VALUES (${appId}, 'wamid.P', ${posted}, 0, ${chatId}),
      (${appId}, 'wamid.U', ${unposted}, 0, ${chatId})`;
  const receipt = (wamid: string, status: "read" | "failed") => ({
    kind: "status" as const,
    phoneNumberId: "1",
    wamid,
    status,
    timestamp: "1800000000",
    recipientId: null,
    error: status === "failed" ? { code: 131026, title: "Message undeliverable" } : null,
  });
  assert.ok(await applyWhatsAppStatus(db.sql, appId, receipt("wamid.P", "read")));
  assert.deepEqual(await mirrorsQueued(db.sql, appId), [], "a read receipt posts nothing");
  assert.ok(await applyWhatsAppStatus(db.sql, appId, receipt("wamid.U", "read")));
  // A failed read message (failed is final, whatever came before): the one not yet in Slack
  // shows its failure when its own post goes.
  assert.ok(await applyWhatsAppStatus(db.sql, appId, receipt("wamid.U", "failed")));
  assert.deepEqual(await mirrorsQueued(db.sql, appId), []);
  assert.ok(await applyWhatsAppStatus(db.sql, appId, receipt("wamid.P", "failed")));
  assert.deepEqual(await mirrorsQueued(db.sql, appId), [`${chatId}:${posted}`]);
});

Deno.test("a send refused for good, for a message already in Slack, queues its Not delivered line", async () => {
  await using db = await createTestDatabase();
  const { appId } = await createKeyedApp(db.sql);
  const { chatId, posted } = await mirroredConversation(db.sql, appId);
  await failSend(db.sql, appId, chatId, posted);
  assert.deepEqual(await mirrorsQueued(db.sql, appId), [`${chatId}:${posted}`]);
  const [message] = await db.sql`SELECT status FROM messages WHERE id = ${posted}`;
  assert.equal(message.status, "failed");
});

Deno.test("a send failing while the message's own Slack post is queued or under way queues its Not delivered line", async () => {
  await using db = await createTestDatabase();
  const { appId } = await createKeyedApp(db.sql);
  const { chatId, unposted } = await mirroredConversation(db.sql, appId);
  // The mirror claimed the message's post and read it before it failed.
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, claimed_at, claimed_until)
    VALUES (${appId}, 'slack', 'message',
      ${db.sql.json({ conversation_id: chatId, message_id: unposted })},
      clock_timestamp(), clock_timestamp() + interval '2 minutes')`;
  await failSend(db.sql, appId, chatId, unposted);
  assert.deepEqual(
    await mirrorsQueued(db.sql, appId),
    [`${chatId}:${unposted}`, `${chatId}:${unposted}`],
    "the post, then the line after it",
  );
});
