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

Deno.test("createHitCounter rejects the hits of a failed write and recovers", async () => {
  let fail = true;
  const counter = createHitCounter((hits) => {
    if (fail) return Promise.reject(new Error("database down"));
    return Promise.resolve(hits.map(({ bucket, n }) => ({ bucket, count: n, resetAt: 60 })));
  });
  await assert.rejects(counter.hit("a"), /database down/);
  fail = false;
  assert.deepEqual(await counter.hit("a"), { count: 1, resetAt: 60 });
});
