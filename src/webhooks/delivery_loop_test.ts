import assert from "node:assert/strict";
import { createDeliveryLoop } from "./delivery_loop.ts";

Deno.test("createDeliveryLoop() attempts what it claims and claims again at once after a full batch", async () => {
  const queue = [1, 2, 3, 4, 5];
  const attempted: number[] = [];
  const loop = createDeliveryLoop({
    claim: (limit) => Promise.resolve(queue.splice(0, limit)),
    attempt: (n) => Promise.resolve(void attempted.push(n)),
    onError: (error) => assert.fail(String(error)),
    batchSize: 2,
    pollMs: 60_000,
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  await loop.stop();
  assert.deepEqual(attempted.sort(), [1, 2, 3, 4, 5]);
});

Deno.test("createDeliveryLoop() sleeps until woken and survives attempts and claims that throw", async () => {
  const queue: number[] = [];
  const attempted: number[] = [];
  const errors: unknown[] = [];
  let claims = 0;
  const loop = createDeliveryLoop({
    claim: (limit) => {
      claims++;
      if (claims === 2) return Promise.reject(new Error("database away"));
      return Promise.resolve(queue.splice(0, limit));
    },
    attempt: (n) => {
      if (n === 13) return Promise.reject(new Error("unlucky"));
      attempted.push(n);
      return Promise.resolve();
    },
    onError: (error) => errors.push(error),
    pollMs: 60_000,
  });
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(claims, 1, "asleep after an empty claim");
  loop.wake(); // this claim fails
  await new Promise((resolve) => setTimeout(resolve, 10));
  queue.push(13, 14);
  loop.wake();
  await new Promise((resolve) => setTimeout(resolve, 10));
  await loop.stop();
  assert.deepEqual(attempted, [14]);
  assert.deepEqual(errors.map((e) => (e as Error).message), ["database away", "unlucky"]);
});

Deno.test("createDeliveryLoop() polls without a wake-up", async () => {
  const queue: number[] = [];
  const attempted: number[] = [];
  const loop = createDeliveryLoop({
    claim: (limit) => Promise.resolve(queue.splice(0, limit)),
    attempt: (n) => Promise.resolve(void attempted.push(n)),
    onError: () => {},
    pollMs: 20,
  });
  queue.push(7);
  await new Promise((resolve) => setTimeout(resolve, 80));
  await loop.stop();
  assert.deepEqual(attempted, [7]);
});

Deno.test("createDeliveryLoop() claims again when a retry it recorded comes due, long before its poll", async () => {
  const claimedAt: number[] = [];
  const due: number[] = [];
  const started = Date.now();
  const loop = createDeliveryLoop({
    claim: (limit) => {
      claimedAt.push(Date.now() - started);
      return Promise.resolve(due.splice(0, limit));
    },
    attempt: (n) => Promise.resolve(n === 1 ? { retryInMs: 150 } : { retryInMs: null }),
    dueAgainInMs: (outcome) => outcome.retryInMs,
    onError: (error) => assert.fail(String(error)),
    pollMs: 60_000,
  });
  due.push(1);
  loop.wake();
  // However late the timers run on a busy machine: then 250 ms more for a claim too many.
  for (let waited = 0; claimedAt.length < 3 && waited < 10_000; waited += 10) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await new Promise((resolve) => setTimeout(resolve, 250));
  await loop.stop();
  // The start, the wake-up, then the retry's: once, 150 ms after the attempt, not at the poll.
  assert.equal(claimedAt.length, 3, JSON.stringify(claimedAt));
  assert.ok(claimedAt[2] >= 150 && claimedAt[2] < 10_000, JSON.stringify(claimedAt));
});

Deno.test("createDeliveryLoop() tells each claim the keys' room, and claims again when a key's share held deliveries back", async () => {
  const queue = Array.from({ length: 10 }, (_, index) => ({ key: 1, id: index }));
  const attempted: number[] = [];
  const rooms: number[] = [];
  const loop = createDeliveryLoop({
    claim: (limit, room) => {
      const free = room.roomOfBusy.get(1) ?? room.roomOfIdle;
      rooms.push(free);
      return Promise.resolve(queue.splice(0, Math.min(limit, free)));
    },
    keyOf: (delivery) => delivery.key,
    attempt: (delivery) =>
      new Promise<void>((resolve) =>
        setTimeout(() => resolve(void attempted.push(delivery.id)), 5)
      ),
    onError: (error) => assert.fail(String(error)),
    batchSize: 8,
    pollMs: 60_000,
  });
  for (let waited = 0; attempted.length < 10 && waited < 2_000; waited += 10) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await loop.stop();
  // Alone, the key may hold 7 of the 8 slots; each attempt that ends makes room for one more.
  assert.equal(rooms[0], 7);
  assert.deepEqual(attempted.sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

Deno.test("createDeliveryLoop() claims again at once when attempts ended while a claim bound by a key's room ran", async () => {
  const queue = Array.from({ length: 100 }, (_, index) => ({ key: 1, id: index }));
  const ends = new Map<number, () => void>();
  const claims: number[] = [];
  let claimGate: Promise<void> = Promise.resolve();
  const loop = createDeliveryLoop({
    claim: async (limit, room) => {
      claims.push(limit);
      await claimGate;
      return queue.splice(0, Math.min(limit, room.roomOfBusy.get(1) ?? room.roomOfIdle));
    },
    keyOf: (delivery) => delivery.key,
    attempt: (delivery) => new Promise<void>((resolve) => ends.set(delivery.id, resolve)),
    onError: (error) => assert.fail(String(error)),
    batchSize: 8,
    pollMs: 60_000,
  });
  const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
  await settle();
  assert.deepEqual(claims, [8], "7 of 8 taken, the key at its share: the loop waits");
  // One attempt ends: the loop claims again, and three more end while that claim runs.
  const { promise: gate, resolve: openGate } = Promise.withResolvers<void>();
  claimGate = gate;
  ends.get(0)!();
  await settle();
  assert.deepEqual(claims, [8, 2]);
  for (const id of [1, 2, 3]) ends.get(id)!();
  await settle();
  openGate();
  await settle();
  // That claim got the one slot the key had then; the three that ended since made room for more.
  assert.ok(claims.length >= 3, `claims: ${claims}`);
  assert.equal(ends.size, 100 - queue.length);
  assert.equal(ends.size, 11);
  claimGate = Promise.resolve();
  for (const [, end] of ends) end();
  queue.length = 0;
  await loop.stop();
});

Deno.test("createDeliveryLoop() with ordered claims again as each attempt ends, for the successor it left", async () => {
  // One conversation's sends: a claim gives the first pending one only while none is in flight.
  const pending = [1, 2, 3];
  let inFlight = false;
  const attempted: number[] = [];
  const loop = createDeliveryLoop({
    claim: () => Promise.resolve(inFlight || pending.length === 0 ? [] : [pending[0]]),
    attempt: async (n) => {
      inFlight = true;
      await new Promise((resolve) => setTimeout(resolve, 5));
      attempted.push(pending.shift()!);
      inFlight = false;
      assert.equal(attempted.at(-1), n);
    },
    ordered: true,
    onError: (error) => assert.fail(String(error)),
    pollMs: 60_000,
  });
  loop.wake();
  const deadline = Date.now() + 5_000;
  while (attempted.length < 3 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await loop.stop();
  assert.deepEqual(attempted, [1, 2, 3], "each successor sent without waiting for the poll");
});
