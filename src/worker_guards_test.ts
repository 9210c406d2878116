import assert from "node:assert/strict";

/** What became of a guarded worker asked to fail as `how`: still answering, or ended. */
function outcome(how: "rejection" | "driver" | "other"): Promise<"alive" | "ended"> {
  const worker = new Worker(
    new URL("../tests/fixtures/guarded_worker.ts", import.meta.url).href,
    { type: "module" },
  );
  return new Promise<"alive" | "ended">((resolve) => {
    worker.onmessage = () => resolve("alive");
    worker.onerror = (event) => {
      event.preventDefault();
      resolve("ended");
    };
    worker.postMessage(how);
  }).finally(() => worker.terminate());
}

Deno.test("guardWorkerThread keeps a thread through a stray rejection and a driver's timer error", async () => {
  assert.equal(await outcome("rejection"), "alive");
  assert.equal(await outcome("driver"), "alive");
});

Deno.test("guardWorkerThread lets any other uncaught error end the thread", async () => {
  assert.equal(await outcome("other"), "ended");
});
