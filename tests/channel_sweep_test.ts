import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { insertApplication } from "../src/db/applications.ts";
import { sweepChannelRecords } from "../src/db/channel_sweep.ts";
import { startTestServer } from "./support/server.ts";
import { eventually } from "./support/eventually.ts";

Deno.test("sweepChannelRecords deletes only what has outlived its use", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const old = new Date(Date.now() - 15 * 86_400_000).toISOString();
  const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
  const body = new Uint8Array([123, 125]);
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, state, created_at) VALUES
      (${app.id}, 'whatsapp', 'send', '{}', 'succeeded', ${old}),
      (${app.id}, 'whatsapp', 'send', '{}', 'pending', ${old}),
      (${app.id}, 'slack', 'message', '{}', 'failed', clock_timestamp())`;
  await db.sql`
    INSERT INTO whatsapp_deliveries (app_id, body, processed_at) VALUES
      (${app.id}, ${body}, ${daysAgo(3.1)}), (${app.id}, ${body}, NULL),
      (${app.id}, ${body}, ${daysAgo(2.9)})`;
  await db.sql`
    INSERT INTO slack_deliveries (kind, body, processed_at) VALUES
      ('event', ${body}, ${daysAgo(3.1)}), ('action', ${body}, ${daysAgo(2.9)})`;
  await db.sql`
    INSERT INTO slack_events (team_id, event_id, received_at) VALUES
      ('T', 'E1', clock_timestamp() - interval '3 days'), ('T', 'E2', clock_timestamp())`;
  await db.sql`
    INSERT INTO slack_deleted_messages (team_id, channel_id, ts, deleted_at) VALUES
      ('T', 'C', '1.1', clock_timestamp() - interval '49 hours'),
      ('T', 'C', '1.2', clock_timestamp() - interval '47 hours')`;
  await db.sql`
    INSERT INTO whatsapp_early_statuses (app_id, wamid, status, received_at) VALUES
      (${app.id}, 'wamid.gone', 'delivered', clock_timestamp() - interval '25 hours'),
      (${app.id}, 'wamid.soon', 'delivered', clock_timestamp() - interval '23 hours')`;
  await db.sql`
    INSERT INTO slack_install_tickets (token_hash, app_id, expires_at) VALUES
      (${new Uint8Array([1])}, ${app.id}, clock_timestamp() - interval '2 days'),
      (${new Uint8Array([2])}, ${app.id}, clock_timestamp())`;
  await db.sql`
    INSERT INTO whatsapp_sent_parts (app_id, wamid, message_id, part, sent_at) VALUES
      (${app.id}, 'wamid.old', 1, 0, clock_timestamp() - interval '31 days'),
      (${app.id}, 'wamid.new', 2, 0, clock_timestamp() - interval '29 days')`;
  assert.equal(await sweepChannelRecords(db.sql), 8);
  const [left] = await db.sql`
    SELECT (SELECT count(*) FROM outbox) AS outbox,
      (SELECT count(*) FROM whatsapp_deliveries) AS whatsapp,
      (SELECT count(*) FROM slack_deliveries) AS slack,
      (SELECT count(*) FROM slack_events) AS events,
      (SELECT count(*) FROM slack_install_tickets) AS tickets,
      (SELECT string_agg(ts, ',') FROM slack_deleted_messages) AS deletions,
      (SELECT string_agg(wamid, ',') FROM whatsapp_early_statuses) AS receipts,
      (SELECT string_agg(wamid, ',') FROM whatsapp_sent_parts) AS parts`;
  assert.deepEqual({ ...left }, {
    outbox: 2,
    whatsapp: 2,
    slack: 1,
    events: 1,
    tickets: 1,
    deletions: "1.2",
    receipts: "wamid.soon",
    parts: "wamid.new",
  });
  assert.equal(await sweepChannelRecords(db.sql), 0);
});

Deno.test("an instance sweeps once soon after it starts, not only after its first hour", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const body = new Uint8Array([123, 125]);
  await db.sql`
    INSERT INTO whatsapp_deliveries (app_id, body, processed_at) VALUES
      (${app.id}, ${body}, clock_timestamp() - interval '4 days'),
      (${app.id}, ${body}, clock_timestamp() - interval '1 day')`;
  await using _server = await startTestServer(db.url, {}, {
    sweeps: { firstInMs: 50, everyMs: 3_600_000 },
  });
  await eventually(
    () => db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM whatsapp_deliveries`,
    (rows) => rows[0].n === 1,
    "the first sweep",
  );
});
