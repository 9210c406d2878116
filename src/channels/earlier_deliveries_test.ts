import assert from "node:assert/strict";
import { drawStorerId, waitForEarlier } from "./earlier_deliveries.ts";
import { ApplyDeferredError } from "./ordered_apply.ts";

Deno.test("each storer draws its own id, a safe integer", () => {
  const ids = Array.from({ length: 100 }, () => drawStorerId());
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(ids.every((id) => Number.isSafeInteger(id) && id >= 0));
});

Deno.test("the wait ends once every earlier request is applied, looking at those left only", async () => {
  const looks: number[][] = [];
  const applied = new Set<number>();
  const left = await waitForEarlier([7, 9], (ids) => {
    looks.push([...ids]);
    // The first look finds both waiting; 7 is applied next, then 9.
    if (looks.length === 2) applied.add(7);
    if (looks.length === 3) applied.add(9);
    return Promise.resolve(ids.filter((id) => !applied.has(id)));
  }, { until: Date.now() + 5_000 });
  assert.deepEqual(left, []);
  assert.deepEqual(looks, [[7, 9], [7, 9], [9]]);
});

Deno.test("the wait gives up at its deadline and says what is still waiting", async () => {
  const started = Date.now();
  let looks = 0;
  const left = await waitForEarlier([4], (ids) => {
    looks++;
    return Promise.resolve([...ids]);
  }, { until: started + 150 });
  assert.deepEqual(left, [4]);
  assert.ok(Date.now() - started < 1_000, "it stops at its deadline");
  assert.ok(looks > 2, "it looked again while it waited");
});

Deno.test("stopping ends the wait: the request is left to recovery", async () => {
  const stopped = new AbortController();
  const waiting = waitForEarlier([4], (ids) => Promise.resolve([...ids]), {
    until: Date.now() + 60_000,
    signal: stopped.signal,
  });
  setTimeout(() => stopped.abort(), 20);
  await assert.rejects(waiting, ApplyDeferredError);
});

Deno.test("nothing earlier, nothing looked at", async () => {
  const left = await waitForEarlier([], () => {
    throw new Error("looked");
  }, { until: 0 });
  assert.deepEqual(left, []);
});
