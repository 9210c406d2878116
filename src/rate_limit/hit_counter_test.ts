import assert from "node:assert/strict";
import { type AddHits, createHitCounter } from "./hit_counter.ts";

function memoryStore() {
  const counts = new Map<string, number>();
  const calls: { bucket: string; n: number }[][] = [];
  const addHits: AddHits = async (hits) => {
    calls.push(hits);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return hits.map(({ bucket, n }) => {
      counts.set(bucket, (counts.get(bucket) ?? 0) + n);
      return { bucket, count: counts.get(bucket)!, resetAt: 60 };
    });
  };
  return { addHits, calls };
}

Deno.test("createHitCounter gives every hit of a bucket its own consecutive count", async () => {
  const store = memoryStore();
  const counter = createHitCounter(store.addHits);
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => counter.hit(i % 2 === 0 ? "a" : "b")),
  );
  const countsOf = (bucket: number) =>
    results.filter((_, i) => i % 2 === bucket).map((r) => r.count).sort((x, y) => x - y);
  assert.deepEqual(countsOf(0), Array.from({ length: 25 }, (_, i) => i + 1));
  assert.deepEqual(countsOf(1), Array.from({ length: 25 }, (_, i) => i + 1));
});

Deno.test("createHitCounter coalesces hits that arrive during a write", async () => {
  const store = memoryStore();
  const counter = createHitCounter(store.addHits);
  const first = counter.hit("a");
  await new Promise((resolve) => setTimeout(resolve, 1)); // first write is in flight
  const rest = Array.from({ length: 100 }, () => counter.hit("a"));
  await Promise.all([first, ...rest]);
  assert.equal(store.calls.length, 2, "the first hit alone, then the hundred that waited");
  assert.equal(store.calls.flat().reduce((sum, h) => sum + h.n, 0), 101);
});

Deno.test("createHitCounter counts in memory while writes fail, after the database's last count", async () => {
  let fail = false;
  const errors: unknown[] = [];
  const store = new Map<string, number>();
  const counter = createHitCounter((hits) => {
    if (fail) return Promise.reject(new Error("database down"));
    return Promise.resolve(hits.map(({ bucket, n }) => {
      store.set(bucket, (store.get(bucket) ?? 0) + n);
      return { bucket, count: store.get(bucket)!, resetAt: 120 };
    }));
  }, { now: () => 61_000, onError: (error) => errors.push(error) });
  store.set("a", 10); // other instances' hits
  assert.deepEqual(await counter.hit("a"), { count: 11, resetAt: 120 });
  fail = true;
  assert.deepEqual(await counter.hit("a"), { count: 12, resetAt: 120 });
  const both = await Promise.all([counter.hit("a"), counter.hit("b")]);
  assert.deepEqual(both, [{ count: 13, resetAt: 120 }, { count: 1, resetAt: 120 }]);
  assert.equal(errors.length, 2);
  assert.match(String(errors[0]), /database down/);
  fail = false;
  // The database speaks again (the hits of the outage were never written).
  assert.deepEqual(await counter.hit("a"), { count: 12, resetAt: 120 });
});

Deno.test("createHitCounter counts in memory past a write the database leaves unanswered, and writes on", async () => {
  const frozen = Promise.withResolvers<{ bucket: string; count: number; resetAt: number }[]>();
  const errors: unknown[] = [];
  let writes = 0;
  const counter = createHitCounter((hits) => {
    writes++;
    if (writes === 1) return Promise.resolve([{ bucket: "a", count: 7, resetAt: 120 }]);
    if (writes === 2) return frozen.promise;
    return Promise.resolve(hits.map(({ bucket, n }) => ({ bucket, count: 8 + n, resetAt: 120 })));
  }, { now: () => 61_000, onError: (error) => errors.push(error), writeTimeoutMs: 30 });
  assert.deepEqual(await counter.hit("a"), { count: 7, resetAt: 120 });
  assert.deepEqual(await counter.hit("a"), { count: 8, resetAt: 120 }, "from memory, in time");
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]), /unanswered for 30 ms/);
  // The next hit is written, not held behind the write that never came back.
  assert.deepEqual(await counter.hit("a"), { count: 9, resetAt: 120 });
  assert.equal(writes, 3);
  // The late write's failure, when it comes, is nobody's to handle.
  frozen.reject(new Error("connection lost"));
  await new Promise((resolve) => setTimeout(resolve, 1));
});

Deno.test("createHitCounter refuses a write timeout that is not positive", () => {
  const addHits = () => Promise.resolve([]);
  assert.throws(() => createHitCounter(addHits, { writeTimeoutMs: 0 }), RangeError);
  assert.throws(() => createHitCounter(addHits, { writeTimeoutMs: Number.NaN }), RangeError);
});

Deno.test("createHitCounter's memory of counts ends with the window", async () => {
  let nowMs = 61_000;
  let fail = false;
  const counter = createHitCounter((hits) => {
    if (fail) return Promise.reject(new Error("database down"));
    return Promise.resolve(hits.map(({ bucket }) => ({ bucket, count: 50, resetAt: 120 })));
  }, { now: () => nowMs });
  assert.deepEqual(await counter.hit("a"), { count: 50, resetAt: 120 });
  fail = true;
  nowMs = 125_000;
  assert.deepEqual(await counter.hit("a"), { count: 1, resetAt: 180 });
});
