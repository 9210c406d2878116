import assert from "node:assert/strict";
import type { Sql } from "../src/db/client.ts";
import { storeWhatsAppClick } from "../src/db/whatsapp_inbound.ts";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";

type Click = Parameters<typeof storeWhatsAppClick>[2];

/** When WhatsApp says the customer clicked: after the conversation's last inbound message. */
const SENT_AT = new Date(Date.now() - 60_000).toISOString();

/** A customer's open conversation, an hour quiet, waiting on a Flow step and on a reply's buttons. */
async function waitingConversation(sql: Sql) {
  const app = (await createKeyedApp(sql)).appId;
  const [client] = await sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${app}, 'Ana') RETURNING id`;
  await sql`INSERT INTO client_identities (app_id, channel, external_id, client_id)
    VALUES (${app}, 'whatsapp', '4915', ${client.id})`;
  const [chat] = await sql<{ id: number }[]>`
    INSERT INTO conversations (app_id, client_id, channel, status, last_message_at, last_inbound_at)
    VALUES (${app}, ${client.id}, 'whatsapp', 'open', now() - interval '1 hour',
      now() - interval '1 hour')
    RETURNING id`;
  const [step, reply] = await sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, payload)
    VALUES (${app}, ${chat.id}, 'flow', 'buttons', 'pick', '{}'),
      (${app}, ${chat.id}, 'bot', 'buttons', 'or', '{}')
    RETURNING id`;
  await sql`UPDATE conversations SET action_message_id = ${step.id}, flow_node = 'ask',
    reply_action_message_id = ${reply.id} WHERE app_id = ${app} AND id = ${chat.id}`;
  const click = (messageId: number, wamid: string): Click => ({
    kind: "click",
    waId: "4915",
    userId: null,
    name: null,
    wamid,
    timestamp: SENT_AT,
    chatId: chat.id,
    messageId,
    actionId: "yes",
    title: "Yes",
  });
  const state = async () => {
    const [row] = await sql<{
      last_message_at: string;
      last_inbound_at: string;
      action_message_id: number | null;
      flow_node: string | null;
      reply_action_message_id: number | null;
    }[]>`
      SELECT last_message_at, last_inbound_at, action_message_id, flow_node,
        reply_action_message_id
      FROM conversations WHERE app_id = ${app} AND id = ${chat.id}`;
    return row;
  };
  return { app, chat: chat.id, step: step.id, reply: reply.id, click, state };
}

async function createdAt(sql: Sql, app: number, id: number): Promise<string> {
  const [row] = await sql<{ created_at: string }[]>`
    SELECT created_at FROM messages WHERE app_id = ${app} AND id = ${id}`;
  return row.created_at;
}

Deno.test("a click on the Flow's step moves the Flow on, the conversation's activity and its 24-hour window", async () => {
  await using db = await createTestDatabase();
  const c = await waitingConversation(db.sql);
  const stored = await storeWhatsAppClick(db.sql, c.app, c.click(c.step, "wamid.1"));
  assert.equal(stored?.accepted, true);
  assert.equal(stored?.flowNode, "ask");
  const after = await c.state();
  assert.equal(after.last_message_at, await createdAt(db.sql, c.app, stored!.messageId));
  assert.equal(Date.parse(after.last_inbound_at), Date.parse(SENT_AT));
  assert.equal(after.action_message_id, null);
  assert.equal(after.flow_node, null);
  assert.equal(after.reply_action_message_id, c.reply, "the reply's buttons still wait");
});

Deno.test("a click on a reply's buttons consumes that wait only; a stale click is only stored, and both move the activity", async () => {
  await using db = await createTestDatabase();
  const c = await waitingConversation(db.sql);
  const stored = await storeWhatsAppClick(db.sql, c.app, c.click(c.reply, "wamid.2"));
  assert.equal(stored?.accepted, true);
  assert.equal(stored?.flowNode, null);
  let after = await c.state();
  assert.equal(after.last_message_at, await createdAt(db.sql, c.app, stored!.messageId));
  assert.equal(after.action_message_id, c.step);
  assert.equal(after.flow_node, "ask");
  assert.equal(after.reply_action_message_id, null);

  const stale = await storeWhatsAppClick(db.sql, c.app, c.click(c.reply, "wamid.3"));
  assert.equal(stale?.accepted, false);
  after = await c.state();
  assert.equal(after.last_message_at, await createdAt(db.sql, c.app, stale!.messageId));
  assert.equal(after.action_message_id, c.step);
});

Deno.test("a click naming the customer's BSUID too adds it to their client; one known elsewhere stays there", async () => {
  await using db = await createTestDatabase();
  const c = await waitingConversation(db.sql);
  const [other] = await db.sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${c.app}, 'Bo') RETURNING id`;
  await db.sql`INSERT INTO client_identities (app_id, channel, external_id, client_id)
    VALUES (${c.app}, 'whatsapp_user', 'DE.bo', ${other.id})`;
  const identities = () =>
    db.sql<{ channel: string; external_id: string; mine: boolean }[]>`
      SELECT i.channel, i.external_id, i.client_id = c.client_id AS mine
      FROM client_identities i JOIN conversations c ON c.app_id = i.app_id AND c.id = ${c.chat}
      WHERE i.app_id = ${c.app} ORDER BY i.channel, i.external_id`;
  await storeWhatsAppClick(db.sql, c.app, { ...c.click(c.step, "wamid.1"), userId: "DE.ana" });
  await storeWhatsAppClick(db.sql, c.app, { ...c.click(c.reply, "wamid.2"), userId: "DE.bo" });
  assert.deepEqual((await identities()).map((i) => `${i.channel} ${i.external_id} ${i.mine}`), [
    "whatsapp 4915 true",
    "whatsapp_user DE.ana true",
    "whatsapp_user DE.bo false",
  ]);
});
