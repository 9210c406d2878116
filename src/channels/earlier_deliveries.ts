/**
 * The order of a channel's requests across instances. Each instance applies the requests it
 * acknowledged, in their order (see `ordered_apply.ts`); but a platform that sends one request
 * only once the last was answered (Meta, for one customer) may send them to different instances,
 * and the second instance, with nothing queued, would apply its request before the first
 * instance applied the earlier one: a customer's messages stored out of order.
 *
 * So a request waits, before it is applied, for the requests of its application stored before it
 * by another instance that share a scope with it (its customer, its thread; "earlier", as the
 * statement that stored it saw them) to be applied, while they are being applied: one that is not
 * for {@linkcode EARLIER_WAIT_MS} (its instance crashed) is left to recovery. The requests an
 * instance stored itself are ordered by its own order keeper: each stored request names its
 * instance ({@linkcode drawStorerId}).
 */
import { ApplyDeferredError } from "./ordered_apply.ts";

/**
 * How long a wait goes on without any of the requests it waits for being applied: one whose
 * instance crashed is recovery's. While they are being applied, one after another, it goes on.
 */
export const EARLIER_WAIT_MS = 2_000;

/** How often a key's awaited requests are looked at, while some are. */
const LOOK_EVERY_MS = 5;

/**
 * A number naming the instance that stores requests, drawn at random at each start (a restarted
 * instance is another: what it stored before is recovery's).
 */
export function drawStorerId(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2));
  return (high & 0x1f_ffff) * 2 ** 32 + low; // below 2^53
}

/** Which of `ids` of `key` are still waiting to be applied. */
export type StillWaiting<K> = (key: K, ids: readonly number[]) => Promise<number[]>;

/** Options of {@linkcode createEarlierWaits}. */
export interface EarlierWaitsOptions<K> {
  /** @default EARLIER_WAIT_MS */
  patienceMs?: number;
  /** @default LOOK_EVERY_MS */
  lookEveryMs?: number;
  /** Told of a wait given up, with the requests still waiting (for a log line). */
  onGaveUp?: (key: K, left: number[]) => void;
}

/** Waits for other instances' requests, per key. */
export interface EarlierWaits<K> {
  /**
   * Resolves once none of the requests `ids` of `key` is still waiting — to `[]` — or once none
   * of them was applied for `patienceMs`, to those still waiting then. Rejects when they could
   * not be looked at, and with an {@linkcode ApplyDeferredError} once stopped.
   */
  wait(key: K, ids: readonly number[]): Promise<number[]>;
  /** Ends every wait (at shutdown): the requests are left to recovery. */
  stop(): void;
}

interface Waiter {
  ids: Set<number>;
  /** When one of its requests was last seen applied (or it began). */
  progressAt: number;
  resolve(left: number[]): void;
  reject(error: unknown): void;
}

/**
 * Creates the waits. The waits of one key share their looks: one query every `lookEveryMs`
 * while any wait, for all their requests.
 */
export function createEarlierWaits<K>(
  stillWaiting: StillWaiting<K>,
  options: EarlierWaitsOptions<K> = {},
): EarlierWaits<K> {
  const { patienceMs = EARLIER_WAIT_MS, lookEveryMs = LOOK_EVERY_MS } = options;
  const waiters = new Map<K, Set<Waiter>>();
  let stopped = false;

  async function look(key: K, ofKey: Set<Waiter>): Promise<void> {
    while (ofKey.size > 0 && !stopped) {
      const all = new Set<number>();
      for (const waiter of ofKey) for (const id of waiter.ids) all.add(id);
      let still: Set<number>;
      try {
        still = new Set(await stillWaiting(key, [...all]));
      } catch (error) {
        for (const waiter of ofKey) waiter.reject(error);
        ofKey.clear();
        break;
      }
      const now = Date.now();
      for (const waiter of ofKey) {
        for (const id of waiter.ids) {
          // One that joined during the look is looked at next time.
          if (!all.has(id) || still.has(id)) continue;
          waiter.ids.delete(id);
          waiter.progressAt = now;
        }
        if (waiter.ids.size === 0 || now - waiter.progressAt >= patienceMs) {
          if (waiter.ids.size > 0) options.onGaveUp?.(key, [...waiter.ids]);
          waiter.resolve([...waiter.ids]);
          ofKey.delete(waiter);
        }
      }
      if (ofKey.size > 0) await new Promise((resolve) => setTimeout(resolve, lookEveryMs));
    }
    if (waiters.get(key) === ofKey) waiters.delete(key);
  }

  return {
    wait(key, ids) {
      if (ids.length === 0) return Promise.resolve([]);
      if (stopped) return Promise.reject(deferred());
      return new Promise((resolve, reject) => {
        const waiter = { ids: new Set(ids), progressAt: Date.now(), resolve, reject };
        const ofKey = waiters.get(key);
        if (ofKey) return void ofKey.add(waiter);
        const started = new Set([waiter]);
        waiters.set(key, started);
        look(key, started).catch(() => {});
      });
    },
    stop() {
      stopped = true;
      for (const ofKey of waiters.values()) {
        for (const waiter of ofKey) waiter.reject(deferred());
        ofKey.clear();
      }
      waiters.clear();
    },
  };
}

function deferred(): ApplyDeferredError {
  return new ApplyDeferredError("Stopped while waiting for another instance's requests");
}
