/**
 * The order of a channel's requests across instances. Each instance applies the requests it
 * acknowledged, in their order (see `ordered_apply.ts`); but a platform that sends one request
 * only once the last was answered (Meta, for one customer) may send them to different instances,
 * and the second instance, with nothing queued, would apply its request before the first
 * instance applied the earlier one: a customer's messages stored out of order.
 *
 * So a request waits, before it is applied, for the requests of its application stored before it
 * by another instance ("earlier", as the statement that stored it saw them) to be applied, for
 * at most {@linkcode EARLIER_WAIT_MS}: one that takes longer (its instance crashed) is left to
 * recovery. The requests an instance stored itself are ordered by its own order keeper: each
 * stored request names its instance ({@linkcode drawStorerId}).
 */
import { ApplyDeferredError } from "./ordered_apply.ts";

/** Longest wait for another instance's earlier requests to be applied. */
export const EARLIER_WAIT_MS = 5_000;

/** Pauses between looks at the earlier requests; the last one repeats. */
const LOOK_DELAYS_MS = [2, 4, 8, 16, 32, 50];

/**
 * A number naming the instance that stores requests, drawn at random at each start (a restarted
 * instance is another: what it stored before is recovery's).
 */
export function drawStorerId(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2));
  return (high & 0x1f_ffff) * 2 ** 32 + low; // below 2^53
}

/** Options of {@linkcode waitForEarlier}. */
export interface WaitForEarlierOptions {
  /** When the wait ends, applied or not (a `Date.now()` time). */
  until: number;
  /** Ends the wait with an {@linkcode ApplyDeferredError} (at shutdown). */
  signal?: AbortSignal;
}

/**
 * Waits until none of the requests `ids` is still waiting to be applied — `stillWaiting(ids)`
 * answers which are — or until `options.until`; resolves to those still waiting then (none when
 * they were all applied).
 */
export async function waitForEarlier(
  ids: readonly number[],
  stillWaiting: (ids: readonly number[]) => Promise<number[]>,
  options: WaitForEarlierOptions,
): Promise<number[]> {
  let waiting = [...ids];
  for (let look = 0; waiting.length > 0; look++) {
    if (options.signal?.aborted) {
      throw new ApplyDeferredError("Stopped while waiting for another instance's requests");
    }
    waiting = await stillWaiting(waiting);
    const pause = LOOK_DELAYS_MS[Math.min(look, LOOK_DELAYS_MS.length - 1)];
    if (waiting.length === 0 || Date.now() + pause > options.until) break;
    await sleep(pause, options.signal);
  }
  return waiting;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
