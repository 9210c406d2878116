/**
 * What became of a write transaction whose COMMIT got no answer (the connection lost with it, or
 * the database restarted). The transaction marks itself: it writes its id into its session's row
 * of `commit_marks` (see {@linkcode markCommitSql}), and {@linkcode committedAfterAll} asks, on
 * another connection, whether that mark is there. `pg_xact_status` alone would answer wrongly
 * after a crash: PostgreSQL hands out again the transaction ids whose WAL never reached the disk,
 * and a new transaction may commit under the lost one's id (found in a chaos run: acknowledged
 * messages that were never stored).
 */
import type { PendingQuery, Row, Sql, Tx } from "./client.ts";
import { CommitOutcomeUnknown } from "../actors/commit_loop.ts";

/** A transaction's mark: its id and its session's backend process id. */
export interface CommitMark {
  xid: string;
  pid: number;
}

/**
 * The statement part that marks the current transaction: a CTE named `mark` whose one row holds
 * `xid` (text) and `pid`. Prepend it to the transaction's first statement with `WITH`.
 */
export function markCommitSql(sql: Tx): PendingQuery<Row[]> {
  return sql`mark AS (
    INSERT INTO commit_marks (pid, xid) VALUES (pg_backend_pid(), pg_current_xact_id())
    ON CONFLICT (pid) DO UPDATE SET xid = EXCLUDED.xid, at = EXCLUDED.at
    RETURNING xid::text AS xid, pid
  )`;
}

/** What one look at a transaction's fate says. */
export type CommitVerdict = "committed" | "aborted" | "ask again";

/**
 * The verdict of one look: `status` is `pg_xact_status` of the transaction's id, `marked` the id
 * its session's mark now holds (null when there is none). The mark is the proof of a commit; an id
 * reported committed without it belongs to another transaction after a crash — or the commit is
 * in the instant between its record and its visibility, so it is asked again (and, at the
 * deadline, left unknown).
 */
export function commitVerdict(
  xid: string,
  status: string | null,
  marked: string | null,
): CommitVerdict {
  if (marked === xid) return "committed";
  if (status === "aborted") return "aborted";
  return "ask again";
}

/** How long {@linkcode committedAfterAll} keeps asking, and how often. */
const OUTCOME_WAIT_MS = 10_000;
const OUTCOME_POLL_MS = 200;

/**
 * Whether the transaction of `mark` committed, asked on another connection. While the answer is
 * not final (the transaction still in progress because its backend has not yet seen its client
 * go, the database unreachable, an id reported committed without its mark), asks again, for
 * {@linkcode OUTCOME_WAIT_MS} at most; then throws {@linkcode CommitOutcomeUnknown}.
 */
export async function committedAfterAll(sql: Sql, mark: CommitMark): Promise<boolean> {
  const deadline = Date.now() + OUTCOME_WAIT_MS;
  let lastError: unknown;
  for (;;) {
    try {
      const [{ status, marked }] = await sql<{ status: string | null; marked: string | null }[]>`
        SELECT pg_xact_status(${mark.xid}::xid8) AS status,
          (SELECT xid::text FROM commit_marks WHERE pid = ${mark.pid}) AS marked`;
      const verdict = commitVerdict(mark.xid, status, marked);
      if (verdict !== "ask again") return verdict === "committed";
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) throw new CommitOutcomeUnknown({ cause: lastError });
    await new Promise((resolve) => setTimeout(resolve, OUTCOME_POLL_MS));
  }
}

/**
 * Deletes the marks not written for an hour (sessions gone, or idle: the next commit writes its
 * mark again); resolves to their count. A mark is asked about within seconds of its commit.
 */
export async function sweepCommitMarks(sql: Sql): Promise<number> {
  const rows = await sql`
    DELETE FROM commit_marks WHERE at < clock_timestamp() - interval '1 hour' RETURNING pid`;
  return rows.length;
}
