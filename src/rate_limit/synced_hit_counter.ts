/**
 * A hit counter that answers at once from memory and shares its counts through PostgreSQL a
 * few times a second. Each instance adds what it counted since the last write and learns the
 * bucket's total across instances, so a limit holds exactly on one instance and, across
 * instances, to within what they receive in one sync interval. That is the right trade for
 * the widget (abuse protection at 600 requests a minute), where a database round trip on
 * every request would cost a quarter of the throughput; the Open API, whose limit must be
 * exact across instances, keeps the coalescing counter of `hit_counter.ts`.
 */
import { type AddHits, type HitCounter, type HitResult, windowEndOf } from "./hit_counter.ts";

/** Options of {@linkcode createSyncedHitCounter}. */
export interface SyncedHitCounterOptions {
  /** Writes summed hits and returns each bucket's new total (one statement). */
  addHits: AddHits;
  /** Time between writes, in milliseconds. @default 100 */
  intervalMs?: number;
  /** The clock, in milliseconds since the epoch. @default Date.now */
  now?: () => number;
  /** Called with what a failed write threw; its hits are written with the next one.
   * @default ignores it */
  onError?: (error: unknown) => void;
}

/** A synced counter; {@linkcode SyncedHitCounter.stop} writes what is left. */
export interface SyncedHitCounter extends HitCounter {
  /** Writes the hits counted so far now (also what the timer does). */
  sync(): Promise<void>;
  /** Stops the timer and writes what is left. */
  stop(): Promise<void>;
}

interface Bucket {
  /** The total across instances at the last write, this window. */
  known: number;
  /** Hits counted here since that write. */
  unsynced: number;
  /** Unix seconds at which the window ends. */
  resetAt: number;
}

/** Creates a counter and starts its sync timer. */
export function createSyncedHitCounter(options: SyncedHitCounterOptions): SyncedHitCounter {
  const { addHits, intervalMs = 100, now = Date.now, onError = () => {} } = options;
  if (!(intervalMs > 0)) {
    throw new RangeError(
      `Cannot create hit counter: intervalMs must be positive, got ${intervalMs}`,
    );
  }
  const buckets = new Map<string, Bucket>();
  let syncing: Promise<void> | null = null;
  let stopped = false;

  const timer = setInterval(() => void sync(), intervalMs);
  Deno.unrefTimer(timer);

  const windowEnd = () => windowEndOf(now());

  function current(bucket: string): Bucket {
    const end = windowEnd();
    let entry = buckets.get(bucket);
    if (!entry || entry.resetAt < end) {
      // A new window; hits of an ended one that were never written are moot.
      entry = { known: 0, unsynced: 0, resetAt: end };
      buckets.set(bucket, entry);
    }
    return entry;
  }

  function hit(bucket: string): HitResult {
    const entry = current(bucket);
    entry.unsynced++;
    return { count: entry.known + entry.unsynced, resetAt: entry.resetAt };
  }

  function sync(): Promise<void> {
    syncing ??= write().finally(() => syncing = null);
    return syncing;
  }

  async function write(): Promise<void> {
    const end = windowEnd();
    const sent = new Map<string, { entry: Bucket; n: number }>();
    for (const [bucket, entry] of buckets) {
      if (entry.resetAt < end) {
        buckets.delete(bucket);
        continue;
      }
      if (entry.unsynced > 0) sent.set(bucket, { entry, n: entry.unsynced });
    }
    if (sent.size === 0) return;
    try {
      const totals = await addHits([...sent].map(([bucket, { n }]) => ({ bucket, n })));
      for (const total of totals) {
        const was = sent.get(total.bucket);
        // The entry may have rolled over to a new window meanwhile: then the total is moot.
        if (!was || buckets.get(total.bucket) !== was.entry) continue;
        was.entry.known = total.count;
        was.entry.unsynced -= was.n;
        was.entry.resetAt = total.resetAt;
      }
    } catch (error) {
      onError(error);
    }
  }

  return {
    hit,
    sync,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await syncing;
      await sync();
    },
  };
}
