/**
 * Counts requests per bucket in the database without a round trip per request: hits that
 * arrive while a write is in flight are summed per bucket and written together in the next
 * statement, and each caller learns the count its own hit reached. Under load this turns
 * thousands of requests a second into a few statements a second.
 */
import type { BucketCount } from "../db/rate_limits.ts";

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

/** Creates a counter that writes through `addHits`. */
export function createHitCounter(addHits: AddHits): DatabaseHitCounter {
  let pending = new Map<string, Waiter[]>();
  let writers = 0;
  let starting = false;

  async function flush(): Promise<void> {
    starting = false;
    writers++;
    while (pending.size > 0) {
      const batch = pending;
      pending = new Map();
      try {
        const counts = await addHits(
          [...batch].map(([bucket, waiters]) => ({ bucket, n: waiters.length })),
        );
        const byBucket = new Map(counts.map((c) => [c.bucket, c]));
        for (const [bucket, waiters] of batch) {
          const total = byBucket.get(bucket);
          if (!total) {
            for (const w of waiters) w.reject(new Error(`No count returned for a bucket`));
            continue;
          }
          // The hits of this batch are the last `waiters.length` of the new count.
          const first = total.count - waiters.length + 1;
          waiters.forEach((w, i) => w.resolve({ count: first + i, resetAt: total.resetAt }));
        }
      } catch (error) {
        for (const waiters of batch.values()) for (const w of waiters) w.reject(error);
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
