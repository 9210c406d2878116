/**
 * Writes finished attempts in batches: attempts that end while a write is in flight wait for it
 * and go into the next statement together, so the database sees a few statements a second
 * instead of one per delivery. Each caller learns when its own attempt is stored.
 */
import type { RecordedAttempt } from "../db/deliveries.ts";

/** Stores a batch of attempts (one statement). */
export type WriteAttempts = (records: RecordedAttempt[]) => Promise<void>;

/** A coalescing recorder. */
export interface AttemptRecorder {
  /** Resolves once `record` is stored; rejects when its batch could not be. */
  record(record: RecordedAttempt): Promise<void>;
}

interface Waiting {
  record: RecordedAttempt;
  resolve(): void;
  reject(error: unknown): void;
}

/** Creates a recorder writing through `write`, one statement in flight at a time. */
export function createAttemptRecorder(write: WriteAttempts): AttemptRecorder {
  let waiting: Waiting[] = [];
  let writing = false;

  async function flush(): Promise<void> {
    writing = true;
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      try {
        await write(batch.map((entry) => entry.record));
        for (const entry of batch) entry.resolve();
      } catch (error) {
        if (batch.length === 1) {
          batch[0].reject(error);
          continue;
        }
        // One bad record must not cost the others theirs: write them one by one.
        for (const entry of batch) {
          await write([entry.record]).then(entry.resolve, entry.reject);
        }
      }
    }
    writing = false;
  }

  return {
    record(record) {
      return new Promise<void>((resolve, reject) => {
        waiting.push({ record, resolve, reject });
        if (!writing) queueMicrotask(() => void (writing ? undefined : flush()));
      });
    },
  };
}
