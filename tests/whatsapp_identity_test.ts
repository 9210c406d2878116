import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";
import { tuplesRead } from "./support/tuples_read.ts";
import { eventually } from "./support/eventually.ts";
import { waitUntil } from "./support/realtime.ts";
import { insertApplication } from "../src/db/applications.ts";
import { connect, type Sql } from "../src/db/client.ts";
import { claimChannelSends } from "../src/db/channel_sends.ts";
import {
  addWhatsAppIdentities,
  storeWhatsAppMessages,
  type WhatsAppMessageInput,
} from "../src/db/whatsapp_inbound.ts";

/** A customer's text, from their number and/or their business-scoped user id. */
function text(
  appId: number,
  waId: string | null,
  userId: string | null,
  wamid: string,
): WhatsAppMessageInput {
  return {
    appId,
    kind: "message",
    waId,
    userId,
    name: null,
    wamid,
    timestamp: "2026-11-20T10:00:00Z",
    messageType: "text",
    content: wamid,
    payload: null,
  };
}

/** Meta's notice that the customer known by `waId` now writes from `newWaId`, sent `at`. */
function numberChange(sql: Sql, appId: number, waId: string, newWaId: string, at: string) {
  return addWhatsAppIdentities(sql, appId, {
    kind: "identity",
    wamid: `wamid.${waId}.${newWaId}.${at}`,
    timestamp: at,
    waId,
    userId: null,
    newWaId,
    newUserId: null,
  });
}

/** Where a bot's reply in conversation `chatId` is sent: its send, queued and claimed. */
async function replyRecipient(sql: Sql, appId: number, chatId: number) {
  const [message] = await sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, status)
    VALUES (${appId}, ${chatId}, 'bot', 'text', 'hi', 'pending') RETURNING id`;
  await sql`INSERT INTO outbox (app_id, kind, topic, payload) VALUES (${appId}, 'whatsapp',
    'send', ${sql.json({ conversation_id: chatId, message_id: message.id })})`;
  const claimed = await claimChannelSends(sql, { kind: "whatsapp", limit: 8, leaseSeconds: 60 });
  return claimed.rows[0]?.recipient;
}

Deno.test("two instances meeting one new customer at once make one client: the later batch fails and is applied again", async () => {
  await using db = await createTestDatabase();
  const app = (await insertApplication(db.sql, "Acme")).id;
  const other = connect(db.url, { max: 1 });
  try {
    let release!: () => void;
    const held = new Promise<void>((resolve) => release = resolve);
    let stored = false;
    const first = db.sql.begin(async (tx) => {
      await storeWhatsAppMessages(tx, [text(app, "555", "US.5", "w1")]);
      stored = true;
      await held; // open, as another instance's batch would be
    });
    await waitUntil(() => stored, "the first batch's rows written");
    const second = other.begin((tx) => storeWhatsAppMessages(tx, [text(app, "555", "US.5", "w2")]));
    // The second waits for the first's locks, however long it took to get there.
    await eventually(
      () =>
        db.sql`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      ([row]) => row.n > 0,
      "the second batch waiting for the first's locks",
    );
    release();
    const [one, two] = await Promise.allSettled([first, second]);
    assert.equal(one.status, "fulfilled");
    assert.equal(two.status, "rejected", "never a second client without identity");
    const again = await storeWhatsAppMessages(db.sql, [text(app, "555", "US.5", "w2")]);
    assert.ok(again.stored[0] !== null);
  } finally {
    await other.end();
  }
  const clients = await db.sql`SELECT id FROM clients WHERE app_id = ${app}`;
  const chats = await db.sql`SELECT DISTINCT conversation_id FROM messages WHERE app_id = ${app}`;
  assert.equal(clients.length, 1);
  assert.equal(chats.length, 1);
});

Deno.test("a message from a BSUID alone goes to the client that BSUID names, however it is batched", async () => {
  await using db = await createTestDatabase();
  const app = (await insertApplication(db.sql, "Acme")).id;
  // Client B was met by BSUID alone (the number hidden), client A by number alone.
  const [b] = (await storeWhatsAppMessages(db.sql, [text(app, null, "US.9", "b0")])).stored;
  const [a] = (await storeWhatsAppMessages(db.sql, [text(app, "999", null, "a0")])).stored;
  assert.notEqual(a!.chatId, b!.chatId);
  const [alone] = (await storeWhatsAppMessages(db.sql, [text(app, null, "US.9", "x1")])).stored;
  const batched = await storeWhatsAppMessages(db.sql, [
    text(app, "999", "US.9", "x2"),
    text(app, null, "US.9", "x3"),
  ]);
  assert.equal(alone!.chatId, b!.chatId);
  assert.equal(batched.stored[0]!.chatId, a!.chatId, "the number names A");
  assert.equal(batched.stored[1]!.chatId, b!.chatId, "the BSUID alone names B, batched or not");
});

Deno.test("a new customer met in one batch by number and BSUID and by BSUID alone is one client", async () => {
  await using db = await createTestDatabase();
  const app = (await insertApplication(db.sql, "Acme")).id;
  const { stored } = await storeWhatsAppMessages(db.sql, [
    text(app, null, "US.7", "n1"),
    text(app, "777", "US.7", "n2"),
    text(app, null, "US.7", "n3"),
  ]);
  assert.deepEqual(new Set(stored.map((one) => one!.chatId)).size, 1);
  const identities = await db.sql`
    SELECT channel, external_id FROM client_identities WHERE app_id = ${app} ORDER BY channel`;
  assert.deepEqual(identities.map((row) => `${row.channel} ${row.external_id}`), [
    "whatsapp 777",
    "whatsapp_user US.7",
  ]);
  const [{ clients }] = await db.sql`SELECT count(*)::int AS clients FROM clients`;
  assert.equal(clients, 1);
});

Deno.test("replies go to the number the customer changed to last, even back to an earlier one; a late notice changes nothing", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  const [first] = (await storeWhatsAppMessages(db.sql, [text(app, "111", null, "w1")])).stored;
  const later = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();
  const [away, back] = [later(1), later(2)];
  assert.equal(await numberChange(db.sql, app, "111", "222", away), 1);
  assert.equal(await numberChange(db.sql, app, "222", "111", back), 1);
  // The first notice again, as Meta may deliver it twice: 111 stays the newest.
  assert.equal(await numberChange(db.sql, app, "111", "222", away), 0);
  assert.deepEqual(await replyRecipient(db.sql, app, first!.chatId), { kind: "phone", id: "111" });
});

Deno.test("storing messages and adding identities read a few identities, not the table", async () => {
  await using db = await createTestDatabase();
  const app = (await insertApplication(db.sql, "Acme")).id;
  await db.sql`
    WITH c AS (
      INSERT INTO clients (app_id, name) SELECT ${app}, 'c' || n FROM generate_series(1, 5000) n
      RETURNING id
    )
    INSERT INTO client_identities (app_id, channel, external_id, client_id)
    SELECT ${app}, ch, CASE WHEN ch = 'whatsapp' THEN '4915' || id ELSE 'US.' || id END, id
    FROM c CROSS JOIN (VALUES ('whatsapp'), ('whatsapp_user')) AS v (ch)`;
  await db.sql`ANALYZE`;
  for (const mode of ["force_custom_plan", "force_generic_plan"]) {
    const read = await tuplesRead(db.sql, { table: "client_identities" }, async (sql) => {
      await sql.unsafe(`SET plan_cache_mode = ${mode}`);
      for (let i = 0; i < 6; i++) {
        await storeWhatsAppMessages(sql, [
          text(app, `4915${100 + i}`, null, `a${mode}${i}`),
          text(app, null, `US.${200 + i}`, `b${mode}${i}`),
          text(app, `999${i}`, `US.new${i}`, `c${mode}${i}`),
        ]);
        await numberChange(sql, app, `4915${300 + i}`, `77${mode}${i}`, "2026-11-21T10:00:00Z");
      }
      await sql`RESET plan_cache_mode`;
    });
    assert.ok(read < 500, `${mode}: read ${read} identities`);
  }
});

Deno.test("which number is newest is judged by Meta's times, however late Parley stored the first message", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  // Sent on November 20 at 10:00 and stored only now (a redelivery after an outage, say); the
  // customer changed their number a minute after sending it.
  const [first] = (await storeWhatsAppMessages(db.sql, [text(app, "111", null, "w1")])).stored;
  assert.equal(await numberChange(db.sql, app, "111", "222", "2026-11-20T10:01:00Z"), 1);
  assert.deepEqual(await replyRecipient(db.sql, app, first!.chatId), { kind: "phone", id: "222" });
});
