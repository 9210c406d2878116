import assert from "node:assert/strict";
import { createInFlightLimit } from "./in_flight_limit.ts";

Deno.test("createInFlightLimit lets `slots` through and the rest in order as slots free", async () => {
  const limit = createInFlightLimit(2);
  const order: number[] = [];
  const started = [1, 2, 3, 4].map((n) => limit.acquire().then(() => order.push(n)));
  await Promise.resolve();
  await Promise.resolve();
  assert.deepEqual(order, [1, 2]);
  limit.release();
  limit.release();
  await Promise.all(started);
  assert.deepEqual(order, [1, 2, 3, 4]);
  assert.throws(() => createInFlightLimit(0), RangeError);
});
