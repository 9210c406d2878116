/**
 * Channel requests spread over several instances sharing one database: each instance applies
 * what it acknowledged, and one customer's messages still land in the order the platform sent
 * them.
 */
import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { eventually } from "./support/eventually.ts";
import { startFakeGraphApi } from "./support/fake_graph_api.ts";
import { configureWhatsApp, TEST_WHATSAPP } from "./support/whatsapp_channel.ts";
import { whatsappWebhookBody } from "./support/whatsapp_webhook.ts";
import { metaSignature } from "../src/channels/whatsapp/signature.ts";
import { insertWhatsAppDeliveries } from "../src/db/whatsapp_inbound.ts";
import { createWhatsAppInboundProcessor } from "../src/channels/whatsapp/inbound_processor.ts";
import { createMediaLinks } from "../src/channels/media_links.ts";
import { insertApplication } from "../src/db/applications.ts";
import type { AppCommand } from "../src/actors/protocol.ts";
import {
  installSlack,
  slackServerEnv,
  startTestSlack,
  TEST_WORKSPACE,
} from "./support/slack_workspace.ts";
import { createKeyedApp, createVisitorChat } from "./support/open_api.ts";

const CUSTOMER = "16505551234";

/** Posts a webhook delivery signed as Meta signs it; it must be answered 200. */
async function postDelivery(baseUrl: string, appId: number, raw: string): Promise<void> {
  const res = await fetch(`${baseUrl}/api/v1/whatsapp/webhook/${appId}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-hub-signature-256": metaSignature(new TextEncoder().encode(raw), TEST_WHATSAPP.appSecret),
    },
    body: raw,
  });
  await res.body?.cancel();
  assert.equal(res.status, 200);
}

Deno.test("WhatsApp deliveries sent one after another through two instances are stored in order", async () => {
  await using db = await createTestDatabase();
  await using graph = await startFakeGraphApi({ accessToken: TEST_WHATSAPP.accessToken });
  const env = { WHATSAPP_GRAPH_URL: graph.url };
  await using a = await startTestServer(db.url, env);
  await using b = await startTestServer(db.url, env);
  const app = await createKeyedApp(db.sql);
  await configureWhatsApp(db.sql, app.appId);
  const texts = Array.from({ length: 60 }, (_, i) => `message ${i}`);
  for (const [i, text] of texts.entries()) {
    // As Meta does for one customer: the next delivery only once the last one was answered.
    const raw = JSON.stringify(whatsappWebhookBody(TEST_WHATSAPP.phoneNumberId, {
      contacts: [{ profile: { name: "Kerry Fisher" }, wa_id: CUSTOMER }],
      messages: [{
        from: CUSTOMER,
        id: `wamid.instances.${i}`,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: "text",
        text: { body: text },
      }],
    }));
    const via = i % 2 === 0 ? a : b;
    await postDelivery(via.baseUrl, app.appId, raw);
  }
  await eventually(
    () => db.sql`SELECT count(*)::int AS n FROM messages WHERE sender_type = 'visitor'`,
    ([row]) => row.n === texts.length,
    "every delivery to be applied",
  );
  const stored = await db.sql<{ content: string }[]>`
    SELECT content FROM messages WHERE sender_type = 'visitor' ORDER BY id`;
  assert.deepEqual(stored.map((row) => row.content), texts);
});

Deno.test("a stored delivery lists another instance's waiting deliveries of its customers", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const body = new TextEncoder().encode("{}");
  const [us, them] = [1, 2];
  const kerry: string[] = ["wa:1"];
  const store = (appId: number, scopes: string[] | null = kerry, by = them) =>
    insertWhatsAppDeliveries(db.sql, by, [{ appId, body, scopes }]);
  const [waiting] = await store(app.id);
  const [unreadable] = await store(app.id, null);
  const [someoneElse] = await store(app.id, ["wa:2", "user:US.2"]);
  const [applied] = await store(app.id);
  const [failed] = await store(app.id);
  const [old] = await store(app.id);
  await store(app.id, kerry, us);
  const [otherApps] = await store(other.id);
  await db.sql`UPDATE whatsapp_deliveries SET processed_at = now() WHERE id = ${applied.id}`;
  await db.sql`UPDATE whatsapp_deliveries SET attempts = 1 WHERE id = ${failed.id}`;
  await db.sql`
    UPDATE whatsapp_deliveries SET received_at = now() - interval '1 minute'
    WHERE id = ${old.id}`;
  // In one statement: Kerry's, one of the other application, one that could not be read, one of
  // status receipts, one of another customer known by either id — never the statement's own,
  // nor this instance's earlier one.
  const stored = await insertWhatsAppDeliveries(db.sql, us, [
    { appId: app.id, body, scopes: kerry },
    { appId: other.id, body, scopes: kerry },
    { appId: app.id, body, scopes: null },
    { appId: app.id, body, scopes: [] },
    { appId: app.id, body, scopes: ["user:US.2"] },
  ]);
  assert.deepEqual(stored.map((delivery) => delivery.earlier), [
    [waiting.id, unreadable.id],
    [otherApps.id],
    [waiting.id, unreadable.id, someoneElse.id],
    [unreadable.id],
    [unreadable.id, someoneElse.id],
  ]);
  assert.deepEqual(
    stored.map((delivery) => delivery.id),
    stored.map((_, i) => stored[0].id + i),
    "in the order given",
  );
  const [row] = await db.sql`SELECT scopes FROM whatsapp_deliveries WHERE id = ${someoneElse.id}`;
  assert.deepEqual(row.scopes, ["wa:2", "user:US.2"]);
});

Deno.test("a delivery waits for another instance's earlier one, and only so long", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  await configureWhatsApp(db.sql, app.appId);
  const deliveryOf = (text: string) =>
    new TextEncoder().encode(JSON.stringify(whatsappWebhookBody(TEST_WHATSAPP.phoneNumberId, {
      contacts: [{ profile: { name: "Kerry Fisher" }, wa_id: CUSTOMER }],
      messages: [{
        from: CUSTOMER,
        id: `wamid.${crypto.randomUUID()}`,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: "text",
        text: { body: text },
      }],
    })));
  const asked: { id: number; at: number }[] = [];
  const processor = createWhatsAppInboundProcessor({
    sql: db.sql,
    // Applies a delivery as the actor would, as far as the waits can tell.
    ask: async (_key, command: AppCommand) => {
      if (command.kind === "whatsapp.inbound") {
        asked.push({ id: command.deliveryId, at: Date.now() });
        await db.sql`
          UPDATE whatsapp_deliveries SET processed_at = now() WHERE id = ${command.deliveryId}`;
      }
      return { ok: true, value: { applied: 1 } };
    },
    mediaLinks: createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" }),
    applyWindowMs: 1,
    earlierWaitMs: 400,
  });
  const [us, them] = [1, 2];
  const store = async (by: number, body: Uint8Array) =>
    (await insertWhatsAppDeliveries(db.sql, by, [{ appId: app.appId, body, scopes: [CUSTOMER] }]))[
      0
    ];
  // Another instance stored the first delivery; this one the second.
  const theirs = await store(them, deliveryOf("first"));
  const ourBody = deliveryOf("second");
  const ours = await store(us, ourBody);
  assert.deepEqual(ours.earlier, [theirs.id]);
  const started = Date.now();
  const applying = processor.process(app.appId, ours.id, ourBody, { earlier: ours.earlier });
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(asked.length, 0, "not before the other instance's");
  await db.sql`UPDATE whatsapp_deliveries SET processed_at = now() WHERE id = ${theirs.id}`;
  await applying;
  assert.deepEqual(asked.map((ask) => ask.id), [ours.id]);
  assert.ok(asked[0].at - started < 400, "applied once the earlier one was, not at the deadline");

  // One whose instance never applies it (it crashed) holds the next one back only so long.
  const lost = await store(them, deliveryOf("third"));
  const nextBody = deliveryOf("fourth");
  const next = await store(us, nextBody);
  assert.deepEqual(next.earlier, [lost.id]);
  const waited = Date.now();
  await processor.process(app.appId, next.id, nextBody, { earlier: next.earlier });
  assert.deepEqual(asked.map((ask) => ask.id), [ours.id, next.id]);
  assert.ok(asked[1].at - waited >= 350, `held back ${asked[1].at - waited} ms`);
  processor.stop();
});

Deno.test("Slack thread replies sent one after another through two instances reach the visitor in order", async () => {
  await using db = await createTestDatabase();
  await using slack = await startTestSlack();
  await using a = await startTestServer(db.url, slackServerEnv(slack));
  await using b = await startTestServer(db.url, slackServerEnv(slack));
  const app = await createKeyedApp(db.sql);
  await installSlack(db.sql, a.baseUrl, slack, app.appId);
  const chat = await createVisitorChat(a.baseUrl, app.publicId, "Hello");
  const [{ thread_ts: thread }] = await eventually(
    () => db.sql`SELECT thread_ts FROM slack_threads`,
    (rows) => rows.length > 0,
    "the thread",
  );
  const texts = Array.from({ length: 40 }, (_, i) => `reply ${i}`);
  for (const [i, text] of texts.entries()) {
    const via = i % 2 === 0 ? a : b;
    const res = await slack.postEvent(`${via.baseUrl}/api/v1/slack/events`, {
      type: "event_callback",
      team_id: TEST_WORKSPACE.teamId,
      event_id: `Ev${i}`,
      event_time: Math.floor(Date.now() / 1000),
      event: {
        type: "message",
        channel: TEST_WORKSPACE.channelId,
        thread_ts: thread,
        user: "U2",
        text,
        ts: `1800000000.${String(i).padStart(6, "0")}`,
      },
    });
    await res.body?.cancel();
    assert.equal(res.status, 200);
  }
  const stored = await eventually(
    () =>
      db.sql<{ content: string }[]>`
        SELECT content FROM messages
        WHERE conversation_id = ${chat.chatId} AND sender_type = 'agent' ORDER BY id`,
    (rows) => rows.length === texts.length,
    "every reply to be applied",
  );
  assert.deepEqual(stored.map((row) => row.content), texts);
});

Deno.test("a customer's delivery does not wait for another customer's on another instance", async () => {
  await using db = await createTestDatabase();
  await using graph = await startFakeGraphApi({ accessToken: TEST_WHATSAPP.accessToken });
  await using server = await startTestServer(db.url, { WHATSAPP_GRAPH_URL: graph.url });
  const app = await createKeyedApp(db.sql);
  await configureWhatsApp(db.sql, app.appId);
  const bodyFrom = (customer: string, text: string) =>
    JSON.stringify(whatsappWebhookBody(TEST_WHATSAPP.phoneNumberId, {
      contacts: [{ profile: { name: "Someone" }, wa_id: customer }],
      messages: [{
        from: customer,
        id: `wamid.${crypto.randomUUID()}`,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: "text",
        text: { body: text },
      }],
    }));
  // Another instance stored a delivery of one customer and will never apply it (it crashed).
  await insertWhatsAppDeliveries(db.sql, 42, [{
    appId: app.appId,
    body: new TextEncoder().encode(bodyFrom("16505550001", "lost for now")),
    scopes: ["wa:16505550001"],
  }]);
  const post = (raw: string) => postDelivery(server.baseUrl, app.appId, raw);
  const stored = (text: string) =>
    eventually(
      () => db.sql`SELECT count(*)::int AS n FROM messages WHERE content = ${text}`,
      ([row]) => row.n === 1,
      text,
    );
  const started = Date.now();
  await post(bodyFrom("16505550002", "someone else"));
  await stored("someone else");
  const otherCustomer = Date.now() - started;
  await post(bodyFrom("16505550001", "the same customer"));
  await stored("the same customer");
  const sameCustomer = Date.now() - started - otherCustomer;
  assert.ok(otherCustomer < 1_000, `another customer's waited ${otherCustomer} ms`);
  assert.ok(sameCustomer >= 1_500, `the same customer's waited ${sameCustomer} ms, until 2 s`);
});
