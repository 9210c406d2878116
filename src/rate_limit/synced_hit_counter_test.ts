import assert from "node:assert/strict";
import type { AddHits } from "./hit_counter.ts";
import { createSyncedHitCounter } from "./synced_hit_counter.ts";

/** A stand-in for the rate_limits table: totals per bucket and window, shared by instances. */
function sharedTable(now: () => number) {
  const totals = new Map<string, number>();
  const writes: { bucket: string; n: number }[][] = [];
  let failing = false;
  const addHits: AddHits = (hits) => {
    if (failing) return Promise.reject(new Error("database down"));
    writes.push(hits);
    const resetAt = Math.floor(now() / 60_000) * 60 + 60;
    return Promise.resolve(hits.map(({ bucket, n }) => {
      const key = `${bucket}@${resetAt}`;
      totals.set(key, (totals.get(key) ?? 0) + n);
      return { bucket, count: totals.get(key)!, resetAt };
    }));
  };
  return {
    addHits,
    writes,
    fail(value: boolean) {
      failing = value;
    },
  };
}

Deno.test("createSyncedHitCounter counts from memory and writes only when it syncs", async () => {
  const time = 1_000_000_020_000;
  const table = sharedTable(() => time);
  const counter = createSyncedHitCounter({ addHits: table.addHits, now: () => time });
  try {
    const counts = [];
    for (let i = 0; i < 3; i++) counts.push((await counter.hit("a")).count);
    assert.deepEqual(counts, [1, 2, 3]);
    assert.equal(table.writes.length, 0);
    await counter.sync();
    assert.deepEqual(table.writes, [[{ bucket: "a", n: 3 }]]);
    assert.equal((await counter.hit("a")).resetAt, 1_000_000_080);
  } finally {
    await counter.stop();
  }
});

Deno.test("createSyncedHitCounter learns the hits of other instances at each sync", async () => {
  const time = 1_000_000_020_000;
  const table = sharedTable(() => time);
  const one = createSyncedHitCounter({ addHits: table.addHits, now: () => time });
  const two = createSyncedHitCounter({ addHits: table.addHits, now: () => time });
  try {
    for (let i = 0; i < 3; i++) await one.hit("a");
    for (let i = 0; i < 2; i++) await two.hit("a");
    await one.sync();
    await two.sync();
    await one.sync(); // nothing new to write: one still knows 3
    assert.equal((await two.hit("a")).count, 6);
    assert.equal((await one.hit("a")).count, 4);
    await one.sync();
    assert.equal((await one.hit("a")).count, 7); // 5 + one's fourth; two's sixth is not written yet
  } finally {
    await one.stop();
    await two.stop();
  }
});

Deno.test("createSyncedHitCounter starts over when the minute ends", async () => {
  let time = 1_000_000_050_000;
  const table = sharedTable(() => time);
  const counter = createSyncedHitCounter({ addHits: table.addHits, now: () => time });
  try {
    await counter.hit("a");
    await counter.hit("a");
    await counter.sync();
    time += 40_000; // the next minute
    const next = await counter.hit("a");
    assert.deepEqual(next, { count: 1, resetAt: 1_000_000_140 });
  } finally {
    await counter.stop();
  }
});

Deno.test("createSyncedHitCounter keeps the hits of a failed write for the next one", async () => {
  const time = 1_000_000_020_000;
  const table = sharedTable(() => time);
  const errors: unknown[] = [];
  const counter = createSyncedHitCounter({
    addHits: table.addHits,
    now: () => time,
    onError: (error) => errors.push(error),
  });
  try {
    await counter.hit("a");
    table.fail(true);
    await counter.sync();
    assert.equal(errors.length, 1);
    table.fail(false);
    await counter.hit("a");
    await counter.sync();
    assert.deepEqual(table.writes, [[{ bucket: "a", n: 2 }]]);
  } finally {
    await counter.stop();
  }
});

Deno.test("createSyncedHitCounter writes what is left when it stops", async () => {
  const time = 1_000_000_020_000;
  const table = sharedTable(() => time);
  const counter = createSyncedHitCounter({ addHits: table.addHits, now: () => time });
  await counter.hit("a");
  await counter.hit("b");
  await counter.stop();
  assert.deepEqual(table.writes.flat().sort((x, y) => x.bucket < y.bucket ? -1 : 1), [
    { bucket: "a", n: 1 },
    { bucket: "b", n: 1 },
  ]);
});

Deno.test("createSyncedHitCounter refuses a non-positive interval", () => {
  assert.throws(
    () => createSyncedHitCounter({ addHits: () => Promise.resolve([]), intervalMs: 0 }),
    RangeError,
  );
});
