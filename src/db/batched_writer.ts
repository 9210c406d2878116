/**
 * Coalesces single-row writes: while one write is in flight, the rows that arrive wait and go
 * together in the next statement, and each caller gets its own row's answer. The channels'
 * webhooks store every request before answering it; under load this turns hundreds of inserts
 * a second into a few statements, which is what the acknowledgement waits for.
 *
 * A row that finds nothing in flight may wait `lingerMs` for company. At a moderate rate (a
 * request every millisecond) nothing would otherwise be in flight when the next row comes, and
 * each row would pay a whole round trip and commit of its own: on a small machine that is
 * ~250 µs of CPU in the client and as much in PostgreSQL, several times what a row costs in a
 * shared statement.
 */

/**
 * The linger of the channels' webhook stores: a delivery waits up to 1 ms for others to share its
 * insert (a paced loop of 1,000 inserts a second spent about a third less CPU per row on both
 * sides; in the benchmark, the main thread ~10% less per WhatsApp acknowledgement at 2,000/s).
 */
export const STORE_LINGER_MS = 1;

/** Writes `rows` in one statement; answers one result per row, in order. */
export type WriteRows<T, R> = (rows: T[]) => Promise<R[]>;

/** Options of {@linkcode createBatchedWriter}. */
export interface BatchedWriterOptions {
  /** How long a row that finds no write in flight waits for others. @default 0 */
  lingerMs?: number;
  /** A statement's most rows; a full batch is written without lingering. @default 256 */
  maxRows?: number;
}

/** Creates a writer: `write(row)` resolves with that row's result once it is written. */
export function createBatchedWriter<T, R>(
  writeRows: WriteRows<T, R>,
  options: BatchedWriterOptions = {},
): (row: T) => Promise<R> {
  const lingerMs = options.lingerMs ?? 0;
  const maxRows = options.maxRows ?? 256;
  const pending: { row: T; resolve(result: R): void; reject(error: unknown): void }[] = [];
  let writing = false;
  let lingering: ReturnType<typeof setTimeout> | null = null;

  async function flush(): Promise<void> {
    if (lingering !== null) clearTimeout(lingering);
    lingering = null;
    writing = true;
    while (pending.length > 0) {
      const batch = pending.splice(0, maxRows);
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
      if (writing) return;
      if (lingerMs <= 0 || pending.length >= maxRows) void flush();
      else lingering ??= setTimeout(() => void flush(), lingerMs);
    });
}
