import assert from "node:assert/strict";
import type { Sql } from "../src/db/client.ts";
import {
  claimDeliveryRound,
  claimDueDeliveries,
  type ClaimedDelivery,
} from "../src/db/deliveries.ts";
import { replaceWebhook } from "../src/db/webhooks.ts";
import { connectWorkerPool } from "../src/db/client.ts";
import { createDeliveryLoop } from "../src/webhooks/delivery_loop.ts";
import { roundRobin } from "../src/webhooks/round_robin_claim.ts";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";
import { tuplesRead } from "./support/tuples_read.ts";
import { MOST_APPLICATIONS_VISITED } from "../src/db/application_round.ts";

/** Queues `count` webhook deliveries of the application, oldest first; returns their ids. */
async function queue(sql: Sql, appId: number, count: number): Promise<number[]> {
  const rows = await sql<{ id: number }[]>`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at)
    SELECT ${appId}, 'webhook', 'message.sent', '{}',
      clock_timestamp() - interval '1 minute' + make_interval(secs => n / 1000.0)
    FROM generate_series(1, ${count}) AS n
    RETURNING id`;
  return rows.map((row) => row.id);
}

function appsOf(claimed: ClaimedDelivery[]): number[] {
  return claimed.map((delivery) => delivery.appId).sort((a, b) => a - b);
}

Deno.test("a claim serves applications in turn, starting after the one served last, each within its room", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  const b = (await createKeyedApp(db.sql, "B")).appId;
  const c = (await createKeyedApp(db.sql, "C")).appId;
  assert.ok(a < b && b < c);
  await queue(db.sql, a, 10);
  await queue(db.sql, b, 2);
  await queue(db.sql, c, 1);
  const claim = (limit: number, options: object) =>
    claimDueDeliveries(db.sql, { limit, leaseSeconds: 60, ...options });

  // From the start: A first, which fills the claim with its oldest.
  const first = await claim(4, {});
  assert.deepEqual(appsOf(first), [a, a, a, a]);
  assert.deepEqual(first.map((d) => d.turn), [1, 1, 1, 1]);
  // After A: B and C, though A's deliveries are older, then A again.
  const second = await claim(4, { after: a });
  assert.deepEqual(appsOf(second), [a, b, b, c]);
  assert.equal(second.find((d) => d.appId === c)?.turn, 2);
  assert.equal(second.find((d) => d.appId === a)?.turn, 3);
  // A at its share is passed over; another application gets at most its room.
  await queue(db.sql, b, 3);
  await queue(db.sql, c, 3);
  const third = await claim(8, { room: { roomOfBusy: new Map([[a, 0], [b, 1]]), roomOfIdle: 2 } });
  assert.deepEqual(appsOf(third), [b, c, c]);
});

Deno.test("retries and expired leases count against an application's room like first attempts, and one-slot claims reach them", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  const b = (await createKeyedApp(db.sql, "B")).appId;
  const retries = await queue(db.sql, a, 20);
  await db.sql`UPDATE outbox SET attempts = 2 WHERE id = ANY (${retries}::bigint[])`;
  const [leased] = await queue(db.sql, b, 1);
  await db.sql`UPDATE outbox SET claimed_until = clock_timestamp() - interval '1 second'
    WHERE id = ${leased}`;
  const fresh = await queue(db.sql, b, 2);

  // A at its share: none of its retries; B's expired lease and first attempts, oldest first.
  const atShare = await claimDueDeliveries(db.sql, {
    limit: 10,
    leaseSeconds: 60,
    room: { roomOfBusy: new Map([[a, 0]]), roomOfIdle: 10 },
  });
  assert.deepEqual(atShare.map((d) => d.id).sort((x, y) => x - y), [leased, ...fresh]);
  // With room for one, one of A's twenty retries.
  const oneMore = await claimDueDeliveries(db.sql, {
    limit: 10,
    leaseSeconds: 60,
    room: { roomOfBusy: new Map([[a, 1]]), roomOfIdle: 10 },
  });
  assert.deepEqual(oneMore.map((d) => d.id), [retries[0]]);

  // Claims of one slot, as a full deliverer makes them, reach a retry among applications that
  // keep queueing first attempts.
  const others = [];
  for (let n = 0; n < 5; n++) others.push((await createKeyedApp(db.sql, `O${n}`)).appId);
  const claim = roundRobin<ClaimedDelivery>((limit, room, after) =>
    claimDeliveryRound(db.sql, { limit, leaseSeconds: 60, room, after })
  );
  const taken: number[] = [];
  for (let round = 0; round < 12 && !taken.includes(retries[1]); round++) {
    for (const app of others) await queue(db.sql, app, 1);
    taken.push(...(await claim(1, { roomOfBusy: new Map(), roomOfIdle: 1 })).rows.map((d) => d.id));
  }
  assert.ok(taken.includes(retries[1]), "A's next retry, within a round of the applications");
});

Deno.test("a receiver that never answers and a backlog of one application do not hold back another's deliveries", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  const b = (await createKeyedApp(db.sql, "B")).appId;
  await queue(db.sql, a, 100);
  const [bDelivery] = await queue(db.sql, b, 1);

  // A's receiver hangs: its attempts hold their slots until the test ends.
  let releaseHung!: () => void;
  const hung = new Promise<void>((resolve) => releaseHung = resolve);
  const attempted: ClaimedDelivery[] = [];
  let bAttempted!: () => void;
  const bDone = new Promise<void>((resolve) => bAttempted = resolve);
  const loop = createDeliveryLoop({
    claim: roundRobin<ClaimedDelivery>((limit, room, after) =>
      claimDeliveryRound(db.sql, { limit, leaseSeconds: 60, room, after })
    ),
    keyOf: (delivery) => delivery.appId,
    attempt: (delivery) => {
      attempted.push(delivery);
      if (delivery.appId === b) bAttempted();
      return delivery.appId === a ? hung : Promise.resolve();
    },
    onError: (error) => assert.fail(String(error)),
    batchSize: 8,
    pollMs: 50,
  });
  const timeout = setTimeout(releaseHung, 10_000);
  await Promise.race([bDone, hung]);
  releaseHung();
  clearTimeout(timeout);
  await loop.stop();
  assert.ok(
    attempted.some((d) => d.id === bDelivery),
    "B's delivery attempted beside A's hung ones",
  );
  assert.equal(attempted.filter((d) => d.appId === a).length, 7, "A holds its share, 7 of 8");

  // Backlogs of A and C: B's one delivery goes out within the next claims, not after theirs,
  // though B comes last in the applications' order.
  await db.sql`UPDATE outbox SET state = 'succeeded'`;
  const c = (await createKeyedApp(db.sql, "C")).appId;
  const d = (await createKeyedApp(db.sql, "D")).appId;
  await queue(db.sql, a, 200);
  await queue(db.sql, c, 200);
  const [dDelivery] = await queue(db.sql, d, 1);
  const order: number[] = [];
  const backlog = createDeliveryLoop({
    claim: roundRobin<ClaimedDelivery>((limit, room, after) =>
      claimDeliveryRound(db.sql, { limit, leaseSeconds: 60, room, after })
    ),
    keyOf: (delivery) => delivery.appId,
    attempt: (delivery) => {
      order.push(delivery.id);
      return new Promise((resolve) => setTimeout(resolve, 1));
    },
    onError: (error) => assert.fail(String(error)),
    batchSize: 8,
    pollMs: 50,
  });
  while (order.length < 401) await new Promise((resolve) => setTimeout(resolve, 20));
  await backlog.stop();
  const place = order.indexOf(dDelivery);
  assert.ok(place >= 0 && place < 16, `D's delivery went out ${place + 1}th of 401`);
});

Deno.test("disabling the webhook cancels first attempts, retries and expired leases, not one in flight", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  const other = (await createKeyedApp(db.sql, "B")).appId;
  const [fresh, retry, expired, inFlight] = await queue(db.sql, a, 4);
  const [othersDelivery] = await queue(db.sql, other, 1);
  await db.sql`UPDATE outbox SET attempts = 1 WHERE id = ${retry}`;
  await db.sql`UPDATE outbox SET claimed_until = clock_timestamp() - interval '1 second'
    WHERE id = ${expired}`;
  await db.sql`UPDATE outbox SET claimed_until = clock_timestamp() + interval '1 minute'
    WHERE id = ${inFlight}`;
  await replaceWebhook(db.sql, a, { url: "", events: [], enabled: false }, "sealed");
  const rows = await db.sql<{ id: number; state: string }[]>`
    SELECT id, state FROM outbox ORDER BY id`;
  assert.deepEqual(rows.map((row) => [row.id, row.state]), [
    [fresh, "failed"],
    [retry, "failed"],
    [expired, "failed"],
    [inFlight, "pending"],
    [othersDelivery, "pending"],
  ]);
});

Deno.test("a claim does not read the retries scheduled for later", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  // Inserted as retries, not updated into them: an update leaves the rows' earlier index entries
  // behind until a vacuum.
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, attempts, run_at)
    SELECT ${a}, 'webhook', 'message.sent', '{}', 1, clock_timestamp() + interval '1 hour'
    FROM generate_series(1, 5000)`;
  const [due] = await queue(db.sql, a, 1);
  await db.sql`ANALYZE outbox`;
  const read = await tuplesRead(db.sql, { index: "outbox_webhooks_pending" }, async (sql) => {
    const claimed = await claimDueDeliveries(sql, { limit: 8, leaseSeconds: 60 });
    assert.deepEqual(claimed.map((d) => d.id), [due]);
  });
  assert.ok(read < 100, `the claim read ${read} index entries`);
});

Deno.test("a webhook claim on the delivery workers' pool does not read the application's finished history", async () => {
  await using db = await createTestDatabase();
  const a = (await createKeyedApp(db.sql, "A")).appId;
  const b = (await createKeyedApp(db.sql, "B")).appId;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, state)
    SELECT app, 'webhook', 'message.sent', '{}', 'succeeded'
    FROM generate_series(1, 20000) n, unnest(${[a, b]}::bigint[]) app`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, attempts, run_at)
    SELECT ${a}, 'webhook', 'message.sent', '{}', 1, clock_timestamp() + interval '10 minutes'
    FROM generate_series(1, 6700) n`;
  const due = await queue(db.sql, b, 16);
  await db.sql`VACUUM ANALYZE outbox`;
  // The workers' settings: generic plans, no sequential scans.
  const workers = connectWorkerPool(db.url, "parley-delivery");
  try {
    const read = await tuplesRead(workers, { table: "outbox" }, async (sql) => {
      const claimed = await claimDueDeliveries(sql, { limit: 16, leaseSeconds: 60 });
      assert.deepEqual(claimed.map((d) => d.id).sort((x, y) => x - y), due);
    });
    assert.ok(read < 400, `the claim read ${read} outbox rows and index entries`);
  } finally {
    await workers.end();
  }
});

Deno.test("applications whose deliveries all wait for later retries are passed over within one probe", async () => {
  await using db = await createTestDatabase();
  const waiting = await db.sql<{ id: number }[]>`
    INSERT INTO applications (name, public_id)
    SELECT 'later ' || n, 'later' || n FROM generate_series(1, ${MOST_APPLICATIONS_VISITED * 2}) n
    RETURNING id`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, attempts, run_at)
    SELECT id, 'webhook', 'message.sent', '{}', 1, clock_timestamp() + interval '10 minutes'
    FROM unnest(${waiting.map((row) => row.id)}::bigint[]) AS id`;
  const ready = (await createKeyedApp(db.sql, "Ready")).appId;
  const [due] = await queue(db.sql, ready, 1);
  const round = await claimDeliveryRound(db.sql, { limit: 8, leaseSeconds: 60 });
  assert.deepEqual(round.rows.map((d) => [d.id, d.turn]), [[due, 1]]);
  assert.equal(round.walkedTo, null);
});

Deno.test("a round stopped at its bound of applications goes on at once, not at the next poll", async () => {
  await using db = await createTestDatabase();
  // More than two rounds' worth of applications whose only delivery is in flight elsewhere (due,
  // but not for this deliverer), then one with a delivery due.
  const stuck = await db.sql<{ id: number }[]>`
    INSERT INTO applications (name, public_id)
    SELECT 'stuck ' || n, 'stuck' || n FROM generate_series(1, ${
    MOST_APPLICATIONS_VISITED * 2 + 10
  }) n
    RETURNING id`;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at, claimed_until)
    SELECT id, 'webhook', 'message.sent', '{}', clock_timestamp() - interval '1 minute',
      clock_timestamp() + interval '1 minute'
    FROM unnest(${stuck.map((row) => row.id)}::bigint[]) AS id`;
  const ready = (await createKeyedApp(db.sql, "Ready")).appId;
  const [due] = await queue(db.sql, ready, 1);
  let claims = 0;
  const attempted = Promise.withResolvers<number>();
  const loop = createDeliveryLoop({
    claim: roundRobin<ClaimedDelivery>((limit, room, after) => {
      claims++;
      return claimDeliveryRound(db.sql, { limit, leaseSeconds: 60, room, after });
    }),
    keyOf: (delivery) => delivery.appId,
    attempt: (delivery) => Promise.resolve(attempted.resolve(delivery.id)),
    onError: (error) => assert.fail(String(error)),
    batchSize: 8,
    pollMs: 60_000,
  });
  const timer = setTimeout(() => attempted.reject(new Error("not attempted within 10 s")), 10_000);
  try {
    assert.equal(await attempted.promise, due);
    assert.equal(
      claims,
      3,
      `three rounds: two stopped at their bound, the third found it (${claims})`,
    );
  } finally {
    clearTimeout(timer);
    await loop.stop();
  }
});
