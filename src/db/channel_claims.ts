/**
 * The claim shared by the channel senders (WhatsApp, the Slack mirror): the `due` and `claimed`
 * CTEs that lease up to `limit` pending outbox rows of one kind, never a row while an earlier row
 * of the same conversation is still pending — so that a conversation's messages leave in order
 * even with several senders claiming at once. Fair between applications: the applications with
 * sends pending are taken in turn, starting after `after` and wrapping around, each one's oldest
 * due rows first and at most its room, so that one application's backlog (a broadcast) never
 * holds back another's replies. The caller's statement selects from `claimed` (app_id, id, topic,
 * payload, attempts, claimed_until, turn), joined as {@linkcode claimRound} says so that it returns a
 * row even when nothing was claimed, with `walked_to`.
 */
import type { PendingQuery, Row } from "postgres";
import type { Tx } from "./client.ts";
import type { SlotRoom } from "../domain/fair_share.ts";

/** Options of {@linkcode claimedInConversationOrder}. */
export interface ChannelClaimOptions {
  kind: "whatsapp" | "slack";
  limit: number;
  leaseSeconds: number;
  /** How many each application may be given; by default every one may be given `limit`. */
  room?: SlotRoom<number>;
  /** The round starts with the application after this one (0: the lowest). */
  after?: number;
}

/** Most applications one claim visits. */
export const MOST_APPLICATIONS_VISITED = 256;

/** What a channel claim returns: the rows it claimed, and where its round stopped. */
export interface ChannelClaim<T> {
  rows: T[];
  /**
   * The application a round that found too little stopped at, at its bound of applications
   * visited: the next round starts after it. Null when the round came around or filled the claim.
   */
  walkedTo: number | null;
}

/**
 * The start of a channel claim's final FROM: one row whatever was claimed, carrying `walked_to`,
 * then `c`, the claimed rows (or one row of NULLs).
 */
export function claimRound(sql: Tx): PendingQuery<Row[]> {
  return sql`(SELECT (SELECT app_id FROM walk_end) AS walked_to) AS round
    LEFT JOIN claimed c ON true`;
}

/** The `WITH RECURSIVE …, due AS (…), claimed AS (…), walk_end AS (…)` part of a claim. */
export function claimedInConversationOrder(
  sql: Tx,
  options: ChannelClaimOptions,
): PendingQuery<Row[]> {
  const { limit, leaseSeconds, after = 0 } = options;
  const room = options.room ?? { busy: new Map(), others: limit };
  // A literal, not a parameter: only a literal kind proves the predicate of the partial indexes
  // (`kind <> 'webhook'`) in a prepared statement's generic plan.
  const kind = options.kind === "whatsapp" ? sql`'whatsapp'` : sql`'slack'`;
  return sql`
    WITH RECURSIVE room (app_id, free) AS (
      SELECT * FROM unnest(${[...room.busy.keys()]}::bigint[], ${[...room.busy.values()]}::int[])
    ), walk (app_id, wrapped, turn) AS (
      -- The applications with sends pending, from the one after the last one served, wrapping
      -- around once: a probe of outbox_channel_sends_by_app each.
      SELECT next.app_id, next.app_id <= ${after}, 1 FROM (
        SELECT coalesce((
          SELECT min(o.app_id) FROM outbox o
          WHERE o.kind = ${kind} AND o.state = 'pending' AND o.app_id > ${after}
        ), (
          SELECT min(o.app_id) FROM outbox o WHERE o.kind = ${kind} AND o.state = 'pending'
        )) AS app_id
        OFFSET 0
      ) next
      WHERE next.app_id IS NOT NULL
      UNION ALL
      SELECT next.app_id, walk.wrapped OR next.app_id <= walk.app_id, walk.turn + 1
      FROM walk CROSS JOIN LATERAL (
        SELECT coalesce((
          SELECT min(o.app_id) FROM outbox o
          WHERE o.kind = ${kind} AND o.state = 'pending' AND o.app_id > walk.app_id
        ), CASE WHEN NOT walk.wrapped THEN (
          SELECT min(o.app_id) FROM outbox o WHERE o.kind = ${kind} AND o.state = 'pending'
        ) END) AS app_id
        OFFSET 0
      ) next
      -- Once around: after wrapping, up to the application the round started after.
      WHERE walk.turn < ${MOST_APPLICATIONS_VISITED} AND next.app_id IS NOT NULL
        AND NOT ((walk.wrapped OR next.app_id <= walk.app_id) AND next.app_id > ${after})
    ), due AS (
      SELECT d.app_id, d.id, walk.turn
      FROM walk CROSS JOIN LATERAL (
        SELECT o.app_id, o.id FROM outbox o
        WHERE o.kind = ${kind} AND o.state = 'pending' AND o.app_id = walk.app_id
          -- A stable bound, so that it limits the index scan: under clock_timestamp(), a filter,
          -- an application's sends waiting for later retries were all read by every claim.
          AND o.run_at <= statement_timestamp()
          AND (o.claimed_until IS NULL OR o.claimed_until < clock_timestamp())
          AND NOT EXISTS (
            SELECT 1 FROM outbox e
            WHERE e.kind = ${kind} AND e.state = 'pending' AND e.app_id = o.app_id
              AND (e.payload ->> 'conversation_id')::bigint
                = (o.payload ->> 'conversation_id')::bigint
              AND e.id < o.id
          )
        ORDER BY o.run_at
        LIMIT least(${limit}, coalesce(
          (SELECT room.free FROM room WHERE room.app_id = walk.app_id), ${room.others}))
        FOR UPDATE SKIP LOCKED
      ) d
      LIMIT ${limit}
    ), claimed AS (
      UPDATE outbox o
      SET claimed_until = clock_timestamp() + make_interval(secs => ${leaseSeconds})
      FROM due WHERE o.app_id = due.app_id AND o.id = due.id
      RETURNING o.app_id, o.id, o.topic, o.payload, o.attempts, o.claimed_until, due.turn
    ), walk_end AS (
      -- A round that found too little and stopped at its bound, before coming around: the next
      -- claim goes on after where it stopped, or the applications beyond would never be visited.
      SELECT app_id FROM walk
      WHERE turn = ${MOST_APPLICATIONS_VISITED} AND (SELECT count(*) FROM due) < ${limit}
    )`;
}
