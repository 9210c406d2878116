import assert from "node:assert/strict";
import { createLeaseKeeper } from "./lease_keeper.ts";
import { waitUntil } from "../../tests/support/realtime.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("createLeaseKeeper renews the claims held, together, until their work settles", async () => {
  const renewed: string[][] = [];
  const keeper = createLeaseKeeper<string>({
    renew: (claims) => {
      renewed.push([...claims].sort());
      return Promise.resolve();
    },
    everyMs: 20,
  });
  const alone = () => renewed.filter((claims) => claims.join() === "a").length;
  let shortSettled = false;
  let aloneBefore = 0;
  // "a" is held until it has been renewed alone twice after "b" settled (however late the timers
  // run on a busy machine), "b" until it has been renewed with "a".
  const long = keeper.holding(
    "a",
    () => waitUntil(() => shortSettled && alone() >= aloneBefore + 2, "renewals of a alone"),
  );
  await sleep(30);
  const short = keeper.holding("b", async () => {
    await waitUntil(
      () => renewed.some((claims) => claims.join() === "a,b"),
      "a renewal of a and b",
    );
    throw new Error("send failed");
  });
  await assert.rejects(short, /send failed/);
  aloneBefore = alone();
  shortSettled = true;
  await long;
  const count = renewed.length;
  await sleep(60);
  await keeper.stop();
  assert.ok(renewed.some((claims) => claims.join() === "a,b"), JSON.stringify(renewed));
  assert.equal(renewed.length, count, "nothing renewed once no claim is held");
});

Deno.test("createLeaseKeeper reports a failed renewal and tries again soon, not an interval later", async () => {
  const errors: unknown[] = [];
  const calls: number[] = [];
  const started = performance.now();
  const keeper = createLeaseKeeper<number>({
    renew: () => {
      calls.push(performance.now() - started);
      return calls.length <= 2 ? Promise.reject(new Error("database away")) : Promise.resolve();
    },
    everyMs: 1_000,
    retryMs: 20,
    onError: (error) => errors.push(error),
  });
  await keeper.holding(1, () => waitUntil(() => calls.length >= 3, "a third renewal", 10_000));
  await keeper.stop();
  assert.equal(errors.length, 2);
  // The first at 1 s failed, so did its retry; the next one came 20 ms later, not at 2 s.
  assert.ok(calls.length >= 3 && calls[2] - calls[0] < 500, JSON.stringify(calls));
});

Deno.test("createLeaseKeeper stop() waits for the renewal in progress", async () => {
  const renewal = Promise.withResolvers<void>();
  let started = false;
  const keeper = createLeaseKeeper<number>({
    renew: () => {
      started = true;
      return renewal.promise;
    },
    everyMs: 10,
  });
  const work = keeper.holding(1, () => sleep(30));
  await sleep(20);
  assert.ok(started);
  let stopped = false;
  const stopping = keeper.stop().then(() => stopped = true);
  await sleep(10);
  assert.equal(stopped, false, "its statement is still running on the pool");
  renewal.resolve();
  await stopping;
  await work;
});
