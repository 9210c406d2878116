import assert from "node:assert/strict";
import { createLiveGate, recoverInPages, RECOVERY_PAGE_SIZE } from "./recover_stored.ts";
import { ApplyDeferredError } from "./ordered_apply.ts";
import type { StoredRequestKey } from "../db/stored_requests.ts";

Deno.test("recoverInPages reads page after page by key until one comes back short", async () => {
  const stored = Array.from({ length: RECOVERY_PAGE_SIZE * 2 + 5 }, (_, id) => ({
    id,
    receivedAt: `t${String(id).padStart(4, "0")}`,
  }));
  const asked: (StoredRequestKey | undefined)[] = [];
  const applied: number[] = [];
  const found = await recoverInPages(
    (after) => {
      asked.push(after);
      const from = after === undefined ? 0 : after.id + 1;
      return Promise.resolve(stored.slice(from, from + RECOVERY_PAGE_SIZE));
    },
    (request) => {
      applied.push(request.id);
      return Promise.resolve();
    },
  );
  assert.equal(found, stored.length);
  assert.deepEqual(applied, stored.map((request) => request.id));
  assert.deepEqual(asked.map((key) => key?.id), [
    undefined,
    RECOVERY_PAGE_SIZE - 1,
    RECOVERY_PAGE_SIZE * 2 - 1,
  ]);
});

Deno.test("recoverInPages calls onLastHandedOver once the last page is handed over, before it is applied", async () => {
  const stored = Array.from(
    { length: RECOVERY_PAGE_SIZE + 3 },
    (_, id) => ({ id, receivedAt: "t" }),
  );
  const events: string[] = [];
  const applying = Promise.withResolvers<void>();
  const recovered = recoverInPages(
    (after) => {
      const from = after === undefined ? 0 : after.id + 1;
      return Promise.resolve(stored.slice(from, from + RECOVERY_PAGE_SIZE));
    },
    (request) => {
      events.push(`apply ${request.id}`);
      return request.id < RECOVERY_PAGE_SIZE ? Promise.resolve() : applying.promise;
    },
    { onLastHandedOver: () => events.push("last handed over") },
  );
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(events.at(-1), "last handed over", "while the last page is still being applied");
  assert.equal(events.filter((event) => event === "last handed over").length, 1);
  assert.equal(events.indexOf("last handed over"), stored.length);
  applying.resolve();
  assert.equal(await recovered, stored.length);
});

Deno.test("createLiveGate holds requests while closed and lets them pass in order once opened", async () => {
  const gate = createLiveGate({ maxWaiting: 2 });
  await gate.pass(); // open: at once
  const open = gate.close();
  const passed: string[] = [];
  const first = gate.pass().then(() => passed.push("first"));
  const second = gate.pass().then(() => passed.push("second"));
  await assert.rejects(gate.pass(), ApplyDeferredError, "a third would exceed maxWaiting");
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.deepEqual(passed, [], "held while closed");
  open();
  open(); // again: no effect
  await Promise.all([first, second]);
  assert.deepEqual(passed, ["first", "second"]);
  await gate.pass();
});

Deno.test("createLiveGate holds at most maxWaitingBytes of bodies, and always one", async () => {
  const gate = createLiveGate({ maxWaitingBytes: 1_000 });
  const open = gate.close();
  const big = gate.pass(5_000); // alone: it waits, however large
  await assert.rejects(gate.pass(1), ApplyDeferredError, "nothing more beside it");
  open();
  await big;
  const again = gate.close();
  const held = [gate.pass(600), gate.pass(400)];
  await assert.rejects(gate.pass(1), ApplyDeferredError, "1,000 bytes wait already");
  again();
  await Promise.all(held);
  const last = gate.close();
  // The bytes of those let through no longer count.
  const after = [gate.pass(999), gate.pass(1)];
  last();
  await Promise.all(after);
});

Deno.test("createLiveGate stays closed until every closer opened it", async () => {
  const gate = createLiveGate();
  const openA = gate.close();
  const openB = gate.close();
  let passed = false;
  const waiting = gate.pass().then(() => passed = true);
  openA();
  openA();
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(passed, false, "one closer is still recovering");
  openB();
  await waiting;
  assert.equal(passed, true);
});

Deno.test("createLiveGate opens by itself after maxHoldMs", async () => {
  let expired = 0;
  const gate = createLiveGate({ maxHoldMs: 20, onExpired: () => expired++ });
  const open = gate.close();
  const started = performance.now();
  await gate.pass();
  assert.ok(performance.now() - started >= 15);
  assert.equal(expired, 1);
  open(); // late: no effect
  await gate.pass();
});

Deno.test("createLiveGate lets waiters through a few at a time, in order", async () => {
  const gate = createLiveGate();
  const open = gate.close();
  const passed: number[] = [];
  const all = Array.from({ length: 200 }, (_, i) => gate.pass().then(() => passed.push(i)));
  open();
  for (let i = 0; i < 10; i++) await Promise.resolve();
  assert.ok(passed.length > 0 && passed.length < 200, `${passed.length} passed in one turn`);
  // One arriving now waits behind those still waiting.
  const late = gate.pass().then(() => passed.push(200));
  await Promise.all([...all, late]);
  assert.deepEqual(passed, Array.from({ length: 201 }, (_, i) => i));
});
