/**
 * The round of applications that the outbox claims share (webhook deliveries, WhatsApp sends,
 * the Slack mirror): the CTEs that walk the applications with rows due, one index probe each,
 * from the one after the last one served, wrapping around once, so that each claim serves the
 * applications in turn and each within its room (see `domain/fair_share.ts`).
 */
import type { PendingQuery, Row, Tx } from "./client.ts";
import type { SlotRoom } from "../domain/fair_share.ts";

/** Most applications one round visits. */
export const MOST_APPLICATIONS_VISITED = 256;

/** What a claim returns: the rows it claimed, and where its round stopped. */
export interface ClaimRound<T> {
  rows: T[];
  /**
   * The application a round that found too little stopped at, at its bound of applications
   * visited: the next round starts after it. Null when the round came around or filled the claim.
   */
  walkedTo: number | null;
}

/** Options of {@linkcode roundCtes}. */
export interface RoundOptions {
  /** A condition on `o` (an outbox row) that holds for the rows pending, naming an index's. */
  pending: PendingQuery<Row[]>;
  /** The round starts with the application after this one (0: the lowest). */
  after: number;
  /** How many each application may be given. */
  room: SlotRoom<number>;
}

/**
 * `room (app_id, free)` and `walk (app_id, wrapped, turn)`, the first CTEs of a
 * `WITH RECURSIVE`. A claim takes each walked application's rows `LIMIT` {@linkcode roomOf}.
 */
export function roundCtes(sql: Tx, options: RoundOptions): PendingQuery<Row[]> {
  const { pending, after, room } = options;
  return sql`
    room (app_id, free) AS (
      SELECT * FROM unnest(${[...room.roomOfBusy.keys()]}::bigint[], ${[
    ...room.roomOfBusy.values(),
  ]}::int[])
    ), walk (app_id, wrapped, turn) AS (
      SELECT next.app_id, next.app_id <= ${after}, 1 FROM (
        SELECT coalesce(${firstAfter(sql, pending, after)}, ${firstAfter(sql, pending, 0)})
          AS app_id
        OFFSET 0
      ) next
      WHERE next.app_id IS NOT NULL
      UNION ALL
      SELECT next.app_id, walk.wrapped OR next.app_id <= walk.app_id, walk.turn + 1
      FROM walk CROSS JOIN LATERAL (
        SELECT coalesce(
          ${firstAfter(sql, pending, sql`walk.app_id`)},
          CASE WHEN NOT walk.wrapped THEN ${firstAfter(sql, pending, 0)} END
        ) AS app_id
        OFFSET 0
      ) next
      -- Once around: after wrapping, up to the application the round started after.
      WHERE walk.turn < ${MOST_APPLICATIONS_VISITED} AND next.app_id IS NOT NULL
        AND NOT ((walk.wrapped OR next.app_id <= walk.app_id) AND next.app_id > ${after})
    )`;
}

/**
 * The first application after `after` with rows pending and due: a probe of the pending rows'
 * index, ordered by application and due time as only that index is. The due bound is checked on
 * the index entries, so that applications whose rows all wait for later retries are passed over
 * within the index rather than visited (each visit cost the round two probes, and a thousand
 * such applications a full round of them at every claim). Written as `min(app_id)`, a generic
 * plan could take the primary key's order (app_id, id) instead, and read every finished row of
 * the application before its first pending one (40,000 rows a claim in a test).
 */
function firstAfter(
  sql: Tx,
  pending: PendingQuery<Row[]>,
  after: number | PendingQuery<Row[]>,
): PendingQuery<Row[]> {
  return sql`(SELECT o.app_id FROM outbox o WHERE ${pending} AND o.app_id > ${after}
    AND o.run_at <= statement_timestamp() ORDER BY o.app_id, o.run_at LIMIT 1)`;
}

/** How many rows the walked application may be given: `LIMIT ${roomOf(sql, room, limit)}`. */
export function roomOf(sql: Tx, room: SlotRoom<number>, limit: number): PendingQuery<Row[]> {
  return sql`least(${limit}, coalesce(
    (SELECT room.free FROM room WHERE room.app_id = walk.app_id), ${room.roomOfIdle}))`;
}

/**
 * `walk_end (app_id)`, a CTE after `due` (the rows taken): where a round that found fewer than
 * `limit` rows stopped at its bound, before coming around. The next claim goes on after it, or the
 * applications beyond would never be visited.
 */
export function walkEndCte(sql: Tx, limit: number): PendingQuery<Row[]> {
  return sql`
    walk_end (app_id) AS (
      SELECT app_id FROM walk
      WHERE turn = ${MOST_APPLICATIONS_VISITED} AND (SELECT count(*) FROM due) < ${limit}
    )`;
}

/**
 * The start of a claim's final FROM: one row whatever was claimed, carrying `walked_to`, then
 * `c`, the `claimed` rows (or one row of NULLs). {@linkcode roundOf} reads its rows.
 */
export function claimRound(sql: Tx): PendingQuery<Row[]> {
  return sql`(SELECT (SELECT app_id FROM walk_end) AS walked_to) AS round
    LEFT JOIN claimed c ON true`;
}

/** A claim's result from the rows its statement selected `FROM ${claimRound(sql)}`. */
export function roundOf<R extends { id: number | null; walked_to: number | null }, T>(
  rows: R[],
  toClaimed: (row: R) => T,
): ClaimRound<T> {
  return {
    rows: rows.filter((row) => row.id !== null).map(toClaimed),
    walkedTo: rows[0]?.walked_to ?? null,
  };
}
