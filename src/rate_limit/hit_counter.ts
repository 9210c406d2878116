/**
 * Counts requests per bucket in the database without a round trip per request: hits that
 * arrive while a write is in flight are summed per bucket and written together in the next
 * statement, and each caller learns the count its own hit reached. Under load this turns
 * thousands of requests a second into a few statements a second.
 *
 * When a write fails (the database is down) or is not answered in time (a database that froze
 * without closing its connections), its hits are counted in memory on top of the last count the
 * database gave for the bucket, so the limit still holds on this instance and every answer still
 * carries its rate-limit headers (CONTRACT §2.1); the next write that succeeds speaks for the
 * database again (its count includes a late write's hits, if that one landed after all).
 */
import type { BucketCount } from "../db/rate_limits.ts";
import { settledWithin } from "../settled_within.ts";

/** Writes summed hits and returns each bucket's new count (one statement). */
export type AddHits = (hits: { bucket: string; n: number }[]) => Promise<BucketCount[]>;

/** What a hit learns. */
export interface HitResult {
  /** Requests counted in this window up to and including this one. */
  count: number;
  /** Unix seconds at which the window ends. */
  resetAt: number;
}

/** A coalescing hit counter. */
export interface HitCounter {
  /** Counts one request in `bucket` (at once when the counts are in memory). */
  hit(bucket: string): HitResult | Promise<HitResult>;
}

/** A hit counter whose every hit waits for its count in the database. */
export interface DatabaseHitCounter extends HitCounter {
  hit(bucket: string): Promise<HitResult>;
}

interface Waiter {
  resolve(result: HitResult): void;
  reject(error: unknown): void;
}

/**
 * How many writes may be in flight at once. One: hits that arrive meanwhile wait for it and go
 * in the next statement together. A second writer would shorten that wait by part of a round
 * trip, but under load it halves the hits per statement, and the benchmark's Open API listing
 * measured ~20% more CPU per request with two.
 */
const MAX_WRITES = 1;

/** Unix seconds at which the one-minute window holding `nowMs` ends (as the database counts). */
export function windowEndOf(nowMs: number): number {
  return Math.floor(nowMs / 60_000) * 60 + 60;
}

/** Options of {@linkcode createHitCounter}. */
export interface HitCounterOptions {
  /** The clock, in milliseconds since the epoch. @default Date.now */
  now?: () => number;
  /** Called with what a failed write threw; its hits were counted in memory instead.
   * @default ignores it */
  onError?: (error: unknown) => void;
  /**
   * How long a write may go unanswered before its hits are counted in memory and the next write
   * goes out. @default WRITE_TIMEOUT_MS
   */
  writeTimeoutMs?: number;
}

/** The default of {@linkcode HitCounterOptions.writeTimeoutMs}: a write takes a millisecond. */
export const WRITE_TIMEOUT_MS = 5_000;

/** Creates a counter that writes through `addHits`. */
export function createHitCounter(
  addHits: AddHits,
  options: HitCounterOptions = {},
): DatabaseHitCounter {
  const { now = Date.now, onError = () => {}, writeTimeoutMs = WRITE_TIMEOUT_MS } = options;
  if (!(writeTimeoutMs > 0)) {
    throw new RangeError("Cannot create hit counter: writeTimeoutMs must be positive");
  }
  let pending = new Map<string, Waiter[]>();
  let writers = 0;
  let starting = false;
  /** Each bucket's latest count this window: the database's, plus hits counted here since. */
  let latest = new Map<string, HitResult>();
  let latestWindowEnd = 0;

  /** The buckets' counts of the current window (those of an ended one are dropped). */
  function latestCounts(): Map<string, HitResult> {
    const end = windowEndOf(now());
    if (end !== latestWindowEnd) {
      latest = new Map();
      latestWindowEnd = end;
    }
    return latest;
  }

  /** Counts `waiters` in memory, after the bucket's latest count. */
  function countInMemory(bucket: string, waiters: Waiter[]): void {
    const counts = latestCounts();
    const before = counts.get(bucket) ?? { count: 0, resetAt: latestWindowEnd };
    counts.set(bucket, { count: before.count + waiters.length, resetAt: before.resetAt });
    waiters.forEach((w, i) => w.resolve({ count: before.count + i + 1, resetAt: before.resetAt }));
  }

  async function flush(): Promise<void> {
    starting = false;
    writers++;
    while (pending.size > 0) {
      const batch = pending;
      pending = new Map();
      try {
        const counts = await settledWithin(
          addHits([...batch].map(([bucket, waiters]) => ({ bucket, n: waiters.length }))),
          writeTimeoutMs,
          () => new Error(`The count's write went unanswered for ${writeTimeoutMs} ms`),
        );
        const byBucket = new Map(counts.map((c) => [c.bucket, c]));
        const known = latestCounts();
        for (const [bucket, waiters] of batch) {
          const total = byBucket.get(bucket);
          if (!total) {
            for (const w of waiters) w.reject(new Error(`No count returned for a bucket`));
            continue;
          }
          known.set(bucket, { count: total.count, resetAt: total.resetAt });
          // The hits of this batch are the last `waiters.length` of the new count.
          const first = total.count - waiters.length + 1;
          waiters.forEach((w, i) => w.resolve({ count: first + i, resetAt: total.resetAt }));
        }
      } catch (error) {
        onError(error);
        for (const [bucket, waiters] of batch) countInMemory(bucket, waiters);
      }
    }
    writers--;
  }

  return {
    hit(bucket) {
      return new Promise<HitResult>((resolve, reject) => {
        const waiters = pending.get(bucket);
        if (waiters) waiters.push({ resolve, reject });
        else pending.set(bucket, [{ resolve, reject }]);
        if (writers < MAX_WRITES && !starting) {
          starting = true;
          queueMicrotask(() => void flush());
        }
      });
    },
  };
}
