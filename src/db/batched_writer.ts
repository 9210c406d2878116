/**
 * Coalesces single-row writes: while one write is in flight, the rows that arrive wait and go
 * together in the next statement, and each caller gets its own row's answer. The channels'
 * webhooks store every request before answering it; under load this turns hundreds of inserts
 * a second into a few statements, which is what the acknowledgement waits for.
 */

/** Writes `rows` in one statement; answers one result per row, in order. */
export type WriteRows<T, R> = (rows: T[]) => Promise<R[]>;

/** Creates a writer: `write(row)` resolves with that row's result once it is written. */
export function createBatchedWriter<T, R>(writeRows: WriteRows<T, R>): (row: T) => Promise<R> {
  let pending: { row: T; resolve(result: R): void; reject(error: unknown): void }[] = [];
  let writing = false;

  async function flush(): Promise<void> {
    writing = true;
    while (pending.length > 0) {
      const batch = pending;
      pending = [];
      try {
        const results = await writeRows(batch.map((entry) => entry.row));
        if (results.length !== batch.length) {
          throw new Error(`Cannot write rows: ${results.length} results for ${batch.length} rows`);
        }
        batch.forEach((entry, index) => entry.resolve(results[index]));
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    writing = false;
  }

  return (row) =>
    new Promise<R>((resolve, reject) => {
      pending.push({ row, resolve, reject });
      if (!writing) void flush();
    });
}
