/** Runs the guarded fixture thread (`tests/fixtures/guarded_worker.ts`) and reports its fate. */
import type { GuardedWorkerRequest } from "../fixtures/guarded_worker.ts";

/** What became of a guarded thread asked to fail: still answering, or ended. */
export function guardedOutcome(request: GuardedWorkerRequest): Promise<"alive" | "ended"> {
  const worker = new Worker(
    new URL("../fixtures/guarded_worker.ts", import.meta.url).href,
    { type: "module" },
  );
  return new Promise<"alive" | "ended">((resolve) => {
    worker.onmessage = () => resolve("alive");
    worker.onerror = (event) => {
      event.preventDefault();
      resolve("ended");
    };
    worker.postMessage(request);
  }).finally(() => worker.terminate());
}
