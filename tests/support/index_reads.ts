/**
 * How much of an index a piece of work read, from PostgreSQL's statistics: for tests that a query
 * stops where it should instead of reading past what it needs.
 */
import type { Sql } from "../../src/db/client.ts";

/** How many entries of the index `work` read, on one connection of `sql`. */
export async function indexTuplesRead(
  sql: Sql,
  index: string,
  work: (connection: Sql) => Promise<void>,
): Promise<number> {
  const connection = await sql.reserve();
  try {
    const count = async () => {
      // The backend's pending statistics go to shared memory when it is next idle.
      await connection`SELECT pg_stat_force_next_flush()`;
      const [row] = await connection<{ read: string }[]>`
        SELECT idx_tup_read AS read FROM pg_stat_user_indexes WHERE indexrelname = ${index}`;
      return Number(row.read);
    };
    const before = await count();
    await work(connection as unknown as Sql);
    return await count() - before;
  } finally {
    connection.release();
  }
}
