/**
 * The claim shared by the channel senders (WhatsApp, the Slack mirror): the CTEs that lease up to
 * `limit` pending outbox rows of one kind, never a row while an earlier row of the same order
 * scope is still pending — so that messages leave in order even with several senders claiming at
 * once. A Slack thread's scope is its conversation; a WhatsApp send's is the customer (their
 * `client_id`), whose conversations all reach the one chat on their phone (CONTRACT §6.1:
 * per-number ordered). Fair between applications (`application_round.ts`): the
 * applications with sends pending are taken in turn, each one's oldest due rows first and at most
 * its room, so that one application's backlog (a broadcast) never holds back another's replies.
 * The caller's statement selects `FROM ${claimRound(sql)}`: `c` (app_id, id, topic, payload,
 * attempts, claimed_at, turn) and `round.walked_to`. A claim's lease is short and renewed while
 * its send goes on ({@linkcode renewChannelClaims}); `claimed_at` is the claim's token, which
 * fences the record of what the send did.
 */
import type { PendingQuery, Row, Tx } from "./client.ts";
import type { SlotRoom } from "../domain/fair_share.ts";
import { roomOf, roundCtes, walkEndCte } from "./application_round.ts";

/** Options of {@linkcode claimedInSendOrder}. */
export interface ChannelClaimOptions {
  kind: "whatsapp" | "slack";
  limit: number;
  leaseSeconds: number;
  /** How many each application may be given; by default every one may be given `limit`. */
  room?: SlotRoom<number>;
  /** The round starts with the application after this one (0: the lowest). */
  after?: number;
}

/** The `WITH RECURSIVE …, due AS (…), claimed AS (…), walk_end AS (…)` part of a claim. */
export function claimedInSendOrder(
  sql: Tx,
  options: ChannelClaimOptions,
): PendingQuery<Row[]> {
  const { limit, leaseSeconds, after = 0 } = options;
  const room = options.room ?? { roomOfBusy: new Map(), roomOfIdle: limit };
  // A literal, not a parameter: only a literal kind proves the predicate of the partial indexes
  // (`kind <> 'webhook'`) in a prepared statement's generic plan.
  const kind = options.kind === "whatsapp" ? sql`'whatsapp'` : sql`'slack'`;
  const pending = sql`o.kind = ${kind} AND o.state = 'pending'`;
  // Each probes its partial index: outbox_pending_whatsapp_by_client, outbox_pending_by_conversation.
  const sameScope = options.kind === "whatsapp"
    ? sql`(e.payload ->> 'client_id')::bigint = (o.payload ->> 'client_id')::bigint`
    : sql`(e.payload ->> 'conversation_id')::bigint = (o.payload ->> 'conversation_id')::bigint`;
  return sql`
    WITH RECURSIVE ${roundCtes(sql, { pending, after, room })}, due AS (
      SELECT d.app_id, d.id, walk.turn
      FROM walk CROSS JOIN LATERAL (
        SELECT o.app_id, o.id FROM outbox o
        WHERE ${pending} AND o.app_id = walk.app_id
          -- A stable bound, so that it limits the index scan: under clock_timestamp(), a filter,
          -- an application's sends waiting for later retries were all read by every claim.
          AND o.run_at <= statement_timestamp()
          AND (o.claimed_until IS NULL OR o.claimed_until < clock_timestamp())
          -- An index probe per candidate: without the OFFSET 0 fence, PostgreSQL anti-joined
          -- every pending row of the application (11 s a claim with a paused Slack workspace's
          -- 6,700 posts).
          AND NOT EXISTS (
            SELECT 1 FROM outbox e
            WHERE e.kind = ${kind} AND e.state = 'pending' AND e.app_id = o.app_id
              AND ${sameScope}
              AND e.id < o.id
            OFFSET 0
          )
        ORDER BY o.run_at
        LIMIT ${roomOf(sql, room, limit)}
        FOR UPDATE SKIP LOCKED
      ) d
      LIMIT ${limit}
    ), claimed AS (
      UPDATE outbox o
      SET claimed_until = clock_timestamp() + make_interval(secs => ${leaseSeconds}),
        claimed_at = clock_timestamp()
      FROM due WHERE o.app_id = due.app_id AND o.id = due.id
      RETURNING o.app_id, o.id, o.topic, o.payload, o.attempts, o.claimed_at, due.turn
    ), ${walkEndCte(sql, limit)}`;
}

/**
 * Extends the leases of channel sends still in progress to `leaseSeconds` from now — those whose
 * claim (`claimedAt`) is still the one this sender holds.
 */
export async function renewChannelClaims(
  sql: Tx,
  claims: { appId: number; id: number; claimedAt: string }[],
  leaseSeconds: number,
): Promise<void> {
  if (claims.length === 0) return;
  await sql`
    UPDATE outbox o
    SET claimed_until = clock_timestamp() + make_interval(secs => ${leaseSeconds})
    FROM unnest(${claims.map((c) => c.appId)}::bigint[], ${claims.map((c) => c.id)}::bigint[],
      ${claims.map((c) => c.claimedAt)}::timestamptz[]) AS h(app_id, id, claimed_at)
    WHERE o.app_id = h.app_id AND o.id = h.id AND o.claimed_at = h.claimed_at
      AND o.state = 'pending'`;
}
