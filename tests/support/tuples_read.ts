/**
 * How much of a table or an index a piece of work read, from PostgreSQL's statistics: for tests
 * that a query stops where it should instead of reading past what it needs.
 */
import type { Sql } from "../../src/db/client.ts";

/** What to count: one index's entries read, or a table's rows read by any scan of it. */
export type ReadTarget = { index: string } | { table: string };

/** How many entries or rows `work` read, on one connection of `sql`. */
export async function tuplesRead(
  sql: Sql,
  target: ReadTarget,
  work: (connection: Sql) => Promise<void>,
): Promise<number> {
  const connection = await sql.reserve();
  try {
    const count = async () => {
      // The backend's pending statistics go to shared memory when it is next idle.
      await connection`SELECT pg_stat_force_next_flush()`;
      const [row] = "index" in target
        ? await connection<{ read: string }[]>`
          SELECT idx_tup_read AS read FROM pg_stat_user_indexes
          WHERE indexrelname = ${target.index}`
        : await connection<{ read: string }[]>`
          SELECT coalesce(t.seq_tup_read, 0) + coalesce((
            SELECT sum(i.idx_tup_read) FROM pg_stat_user_indexes i WHERE i.relid = t.relid
          ), 0) AS read
          FROM pg_stat_user_tables t WHERE t.relname = ${target.table}`;
      return Number(row.read);
    };
    const before = await count();
    await work(connection as unknown as Sql);
    return await count() - before;
  } finally {
    connection.release();
  }
}
