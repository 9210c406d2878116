import assert from "node:assert/strict";
import type { Sql } from "../src/db/client.ts";
import { claimChannelSends } from "../src/db/channel_sends.ts";
import { connectWorkerPool } from "../src/db/client.ts";
import { claimRound, MOST_APPLICATIONS_VISITED } from "../src/db/application_round.ts";
import { claimedInSendOrder } from "../src/db/channel_claims.ts";
import { roundRobin } from "../src/webhooks/round_robin_claim.ts";
import { claimMirrorSends } from "../src/db/slack_sends.ts";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";
import { tuplesRead } from "./support/tuples_read.ts";

/**
 * Queues a send of `kind` for each conversation id (each its own customer's), oldest first;
 * returns their ids.
 */
async function queue(
  sql: Sql,
  kind: "whatsapp" | "slack",
  appId: number,
  conversations: number[],
): Promise<number[]> {
  const rows = await sql<{ id: number }[]>`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at)
    SELECT ${appId}, ${kind}, 'message',
      jsonb_build_object('conversation_id', c.id, 'client_id', c.id),
      clock_timestamp() - interval '1 minute' + make_interval(secs => c.n / 1000.0)
    FROM unnest(${conversations}::bigint[]) WITH ORDINALITY AS c (id, n)
    RETURNING id`;
  return rows.map((row) => row.id);
}

const appsOf = (claimed: { appId: number }[]) => claimed.map((c) => c.appId).sort((a, b) => a - b);

for (const kind of ["whatsapp", "slack"] as const) {
  const claim = async (sql: Sql, options: Parameters<typeof claimMirrorSends>[1]) =>
    (kind === "whatsapp"
      ? await claimChannelSends(sql, { kind, ...options })
      : await claimMirrorSends(sql, options)).rows;

  Deno.test(`${kind} sends: the applications are served in turn, each within its room, and a conversation in order`, async () => {
    await using db = await createTestDatabase();
    const a = (await createKeyedApp(db.sql, "A")).appId;
    const b = (await createKeyedApp(db.sql, "B")).appId;
    const c = (await createKeyedApp(db.sql, "C")).appId;
    // A's broadcast: ten conversations, the first one with a second message behind its first.
    const broadcast = await queue(db.sql, kind, a, [1, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const [reply] = await queue(db.sql, kind, b, [1]);
    await queue(db.sql, kind, c, [1, 2]);

    const first = await claim(db.sql, { limit: 4, leaseSeconds: 60 });
    assert.deepEqual(appsOf(first), [a, a, a, a]);
    assert.ok(!first.some((send) => send.id === broadcast[1]), "the conversation's second waits");
    // After A: B's reply and C's sends, though A's are older, then A again.
    const second = await claim(db.sql, { limit: 4, leaseSeconds: 60, after: a });
    assert.deepEqual(appsOf(second), [a, b, c, c]);
    assert.equal(second.find((send) => send.id === reply)?.turn, 1);
    assert.equal(second.find((send) => send.appId === a)?.turn, 3);
    // A at its share is passed over, and another application gets at most its room.
    await queue(db.sql, kind, b, [2, 3]);
    const third = await claim(db.sql, {
      limit: 8,
      leaseSeconds: 60,
      room: { roomOfBusy: new Map([[a, 0]]), roomOfIdle: 1 },
    });
    assert.deepEqual(appsOf(third), [b]);
  });
}

/**
 * How many outbox rows and index entries `work` read on the delivery workers' pool (their
 * settings: generic plans, no sequential scans).
 */
async function outboxReadByWorkers(
  databaseUrl: string,
  work: (sql: Sql) => Promise<void>,
): Promise<number> {
  const workers = connectWorkerPool(databaseUrl, "parley-delivery");
  try {
    return await tuplesRead(workers, { table: "outbox" }, work);
  } finally {
    await workers.end();
  }
}

Deno.test("a channel claim does not read the sends waiting for later retries", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  const b = (await createKeyedApp(db.sql, "B")).appId;
  // Inserted as retries, not updated into them: an update leaves the rows' earlier index entries
  // behind until a vacuum.
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, attempts, run_at)
    SELECT ${a}, 'whatsapp', 'message', jsonb_build_object('conversation_id', n), 1,
      clock_timestamp() + interval '1 hour'
    FROM generate_series(1, 5000) AS n`;
  const [due] = await queue(db.sql, "whatsapp", b, [1]);
  await db.sql`ANALYZE outbox`;
  const read = await tuplesRead(db.sql, { index: "outbox_channel_sends_by_app" }, async (sql) => {
    const claimed = await claimChannelSends(sql, { kind: "whatsapp", limit: 8, leaseSeconds: 60 });
    assert.deepEqual(claimed.rows.map((send) => send.id), [due]);
  });
  assert.ok(read < 100, `the claim read ${read} index entries`);
});

Deno.test("a round that visits its most applications without finding enough goes on after them next time", async () => {
  await using db = await createTestDatabase();
  // More applications than a round visits, each with a send in flight elsewhere and the next one
  // of its conversation held behind it (due, but not to be claimed), then one with a send due.
  const stuck = await db.sql<{ id: number }[]>`
    INSERT INTO applications (name, public_id)
    SELECT 'stuck ' || n, 'stuck' || n FROM generate_series(1, ${MOST_APPLICATIONS_VISITED + 4}) n
    RETURNING id`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at, claimed_until)
    SELECT id, 'whatsapp', 'message', '{"conversation_id": 1, "client_id": 1}',
      clock_timestamp() - interval '1 minute',
      CASE WHEN n = 1 THEN clock_timestamp() + interval '1 minute' END
    FROM unnest(${stuck.map((row) => row.id)}::bigint[]) AS id, generate_series(1, 2) AS n
    ORDER BY id, n`;
  const ready = (await createKeyedApp(db.sql, "Ready")).appId;
  const [due] = await queue(db.sql, "whatsapp", ready, [1]);

  const first = await claimChannelSends(db.sql, { kind: "whatsapp", limit: 8, leaseSeconds: 60 });
  assert.deepEqual(first.rows, []);
  assert.equal(first.walkedTo, stuck[MOST_APPLICATIONS_VISITED - 1].id);
  const second = await claimChannelSends(db.sql, {
    kind: "whatsapp",
    limit: 8,
    leaseSeconds: 60,
    after: first.walkedTo!,
  });
  assert.deepEqual(second.rows.map((send) => send.id), [due]);
  // Four stuck applications and Ready, then from the first around again, still short.
  assert.equal(second.walkedTo, stuck[MOST_APPLICATIONS_VISITED - 6].id);

  // The senders' round-robin wrapper follows it.
  const claimed: number[] = [];
  const claim = roundRobin((limit, room, after) =>
    claimChannelSends(db.sql, { kind: "whatsapp", limit, leaseSeconds: 60, room, after })
  );
  await db.sql`UPDATE outbox SET claimed_until = NULL WHERE id = ${due}`;
  for (let round = 0; round < 2; round++) {
    claimed.push(
      ...(await claim(8, { roomOfBusy: new Map(), roomOfIdle: 8 })).rows.map((send) => send.id),
    );
  }
  assert.deepEqual(claimed, [due]);
});

Deno.test("a channel claim on the delivery workers' pool does not read the application's finished history", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  // Finished webhook deliveries and Slack posts of the application, then a paused workspace's
  // posts, a few of them due again.
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, state)
    SELECT ${a}, k, 'message', jsonb_build_object('conversation_id', n % 500), 'succeeded'
    FROM generate_series(1, 20000) n, unnest('{webhook,slack}'::text[]) k`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at)
    SELECT ${a}, 'slack', 'message', jsonb_build_object('conversation_id', n % 300),
      clock_timestamp() + CASE WHEN n % 300 < 20 THEN interval '-1 minute'
        ELSE interval '10 minutes' END
    FROM generate_series(1, 6700) n`;
  await db.sql`VACUUM ANALYZE outbox`;
  const read = await outboxReadByWorkers(db.url, async (sql) => {
    assert.equal((await claimMirrorSends(sql, { limit: 16, leaseSeconds: 60 })).rows.length, 16);
  });
  assert.ok(read < 400, `the claim read ${read} outbox rows and index entries`);
});

Deno.test("a WhatsApp claim behind a customer's backlog probes each candidate's customer, not the application's sends", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  // A paused number's sends to 300 customers (their conversations 1:1), a few of them due again.
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at)
    SELECT ${a}, 'whatsapp', 'send',
      jsonb_build_object('conversation_id', n % 300, 'client_id', n % 300, 'message_id', n),
      clock_timestamp() + CASE WHEN n % 300 < 20 THEN interval '-1 minute'
        ELSE interval '10 minutes' END
    FROM generate_series(1, 6700) n`;
  await db.sql`VACUUM ANALYZE outbox`;
  const read = await outboxReadByWorkers(db.url, async (sql) => {
    const claimed = await claimChannelSends(sql, { kind: "whatsapp", limit: 16, leaseSeconds: 60 });
    assert.equal(claimed.rows.length, 16);
  });
  assert.ok(read < 100, `the claim read ${read} outbox rows and index entries`);
});

Deno.test("a channel claim checks each candidate's conversation with a probe, never an anti-join of the pending sends", async () => {
  await using db = await createTestDatabase();
  // The workers' settings: generic plans. An anti-join read every pending send of the application
  // per claim (11 s a claim behind a paused workspace's 6,700 posts).
  const workers = connectWorkerPool(db.url, "parley-delivery");
  try {
    for (const kind of ["whatsapp", "slack"] as const) {
      const [{ "QUERY PLAN": plan }] = await workers<{ "QUERY PLAN": unknown }[]>`
        EXPLAIN (FORMAT JSON)
        ${claimedInSendOrder(workers, { kind, limit: 8, leaseSeconds: 60 })}
        SELECT c.id FROM ${claimRound(workers)}`;
      const joins = JSON.stringify(plan).match(/"Join Type":\s*"(Anti|Semi)"/g) ?? [];
      assert.deepEqual(joins, [], `${kind}: ${joins.length} anti-joins in the claim's plan`);
    }
  } finally {
    await workers.end();
  }
});
