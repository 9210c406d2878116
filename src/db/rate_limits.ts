/**
 * Queries of the `rate_limits` table: fixed one-minute windows counted in PostgreSQL, so that
 * every instance sharing the database sees one count. The window is the database's
 * `date_trunc('minute', clock_timestamp())`, so instances with skewed clocks still agree.
 */
import type { Tx } from "./client.ts";

/** The count of one bucket after a hit. */
export interface BucketCount {
  bucket: string;
  count: number;
  /** Unix seconds at which the window ends. */
  resetAt: number;
}

/**
 * Adds `hits[i].n` to bucket `hits[i].bucket` in the current window, all in one statement;
 * returns each bucket's new count. Buckets must be distinct. Rows are written in bucket order,
 * so that statements running at once (in this process or another) never deadlock.
 */
export async function addHits(
  sql: Tx,
  hits: { bucket: string; n: number }[],
): Promise<BucketCount[]> {
  const rows = await sql<{ bucket: string; count: number; reset_at: number }[]>`
    INSERT INTO rate_limits AS r (bucket, window_start, count)
    SELECT hit.bucket, date_trunc('minute', clock_timestamp()), hit.n
    FROM unnest(${hits.map((h) => h.bucket)}::text[], ${hits.map((h) => h.n)}::int[])
      AS hit (bucket, n)
    ORDER BY hit.bucket COLLATE "C"
    ON CONFLICT (bucket, window_start) DO UPDATE SET count = r.count + EXCLUDED.count
    RETURNING r.bucket, r.count, extract(epoch FROM r.window_start)::bigint + 60 AS reset_at`;
  return rows.map((row) => ({ bucket: row.bucket, count: row.count, resetAt: row.reset_at }));
}

/** Deletes windows that ended more than a minute ago; returns how many went. */
export async function deleteExpiredWindows(sql: Tx): Promise<number> {
  const result = await sql`
    DELETE FROM rate_limits
    WHERE window_start < date_trunc('minute', clock_timestamp()) - interval '1 minute'`;
  return result.count;
}
