import assert from "node:assert/strict";
import { createEarlierWaits, drawStorerId } from "./earlier_deliveries.ts";
import { ApplyDeferredError } from "./ordered_apply.ts";

Deno.test("each storer draws its own id, a safe integer", () => {
  const ids = Array.from({ length: 100 }, () => drawStorerId());
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(ids.every((id) => Number.isSafeInteger(id) && id >= 0));
});

Deno.test("a wait ends once every request it waits for is applied; a key's waits share looks", async () => {
  const looks: { key: string; ids: number[] }[] = [];
  const waiting = new Set([7, 8, 9]);
  const waits = createEarlierWaits<string>((key, ids) => {
    looks.push({ key, ids: [...ids].sort() });
    return Promise.resolve(ids.filter((id) => waiting.has(id)));
  }, { lookEveryMs: 5 });
  const first = waits.wait("A", [7, 9]);
  const second = waits.wait("A", [8]);
  await new Promise((resolve) => setTimeout(resolve, 30));
  waiting.delete(8);
  assert.deepEqual(await second, []);
  waiting.delete(7);
  waiting.delete(9);
  assert.deepEqual(await first, []);
  assert.ok(looks.some((look) => look.ids.join() === "7,8,9"), "one look for both waits");
  const count = looks.length;
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(looks.length, count, "no looks once nothing waits");
});

Deno.test("a wait goes on while its requests are applied, and gives up once none is", async () => {
  const waiting = new Set([1, 2, 3, 4]);
  const gaveUp: [number, number[]][] = [];
  const waits = createEarlierWaits<number>(
    (_key, ids) => Promise.resolve(ids.filter((id) => waiting.has(id))),
    { patienceMs: 100, lookEveryMs: 5, onGaveUp: (key, left) => gaveUp.push([key, left]) },
  );
  const started = Date.now();
  const waited = waits.wait(1, [1, 2, 3, 4]);
  // One applied every 60 ms: each within the patience of the one before.
  for (const id of [1, 2, 3]) {
    await new Promise((resolve) => setTimeout(resolve, 60));
    waiting.delete(id);
  }
  // The last one never is (its instance crashed).
  assert.deepEqual(await waited, [4]);
  const took = Date.now() - started;
  assert.ok(took >= 250 && took < 1_000, `gave up after ${took} ms`);
  assert.deepEqual(gaveUp, [[1, [4]]], "told, for its log");
});

Deno.test("a failed look fails its key's waits; stopping defers every wait", async () => {
  const waits = createEarlierWaits<string>((key, ids) =>
    key === "broken" ? Promise.reject(new Error("unreachable")) : Promise.resolve([...ids])
  );
  await assert.rejects(waits.wait("broken", [1]), /unreachable/);
  const pending = waits.wait("fine", [2]);
  setTimeout(() => waits.stop(), 20);
  await assert.rejects(pending, ApplyDeferredError);
  await assert.rejects(waits.wait("fine", [3]), ApplyDeferredError);
  assert.deepEqual(await waits.wait("fine", []), [], "nothing to wait for");
});
