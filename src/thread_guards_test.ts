import assert from "node:assert/strict";
import { guardedOutcome } from "../tests/support/guarded_thread.ts";

Deno.test("guardWorkerThread keeps a thread through a stray rejection and a driver's timer error", async () => {
  assert.equal(await guardedOutcome({ guard: "worker", how: "rejection" }), "alive");
  assert.equal(await guardedOutcome({ guard: "worker", how: "driver" }), "alive");
});

Deno.test("guardWorkerThread lets any other uncaught error end the thread", async () => {
  assert.equal(await guardedOutcome({ guard: "worker", how: "other" }), "ended");
});

Deno.test("guardMainThread keeps the thread through the database driver's failures only", async () => {
  assert.equal(await guardedOutcome({ guard: "main", how: "driver-rejection" }), "alive");
  assert.equal(await guardedOutcome({ guard: "main", how: "driver" }), "alive");
  assert.equal(await guardedOutcome({ guard: "main", how: "rejection" }), "ended");
  assert.equal(await guardedOutcome({ guard: "main", how: "statement-rejection" }), "ended");
  assert.equal(await guardedOutcome({ guard: "main", how: "orphaned-write" }), "alive");
  assert.equal(await guardedOutcome({ guard: "none", how: "socket-write" }), "ended");
  assert.equal(await guardedOutcome({ guard: "main", how: "socket-write" }), "alive");
  assert.equal(await guardedOutcome({ guard: "main", how: "own-write" }), "ended");
  assert.equal(await guardedOutcome({ guard: "main", how: "other" }), "ended");
});
