/**
 * The claim shared by the channel senders (WhatsApp, the Slack mirror): the `due` and `claimed`
 * CTEs that lease up to `limit` pending outbox rows of one kind, the oldest first, but never a
 * row while an earlier row of the same conversation is still pending — so that a conversation's
 * messages leave in order even with several senders claiming at once. The caller's statement
 * selects from `claimed` (app_id, id, topic, payload, attempts, claimed_until).
 */
import type { PendingQuery, Row } from "postgres";
import type { Tx } from "./client.ts";

/** Options of {@linkcode claimedInConversationOrder}. */
export interface ChannelClaimOptions {
  kind: "whatsapp" | "slack";
  limit: number;
  leaseSeconds: number;
}

/** The `WITH due AS (…), claimed AS (…)` part of a channel claim. */
export function claimedInConversationOrder(
  sql: Tx,
  options: ChannelClaimOptions,
): PendingQuery<Row[]> {
  // A literal, not a parameter: only a literal kind proves the predicate of the partial indexes
  // (`kind <> 'webhook'`) in a prepared statement's generic plan.
  const kind = options.kind === "whatsapp" ? sql`'whatsapp'` : sql`'slack'`;
  return sql`
    WITH due AS (
      SELECT o.app_id, o.id FROM outbox o
      WHERE o.kind = ${kind} AND o.state = 'pending' AND o.run_at <= clock_timestamp()
        AND (o.claimed_until IS NULL OR o.claimed_until < clock_timestamp())
        AND NOT EXISTS (
          SELECT 1 FROM outbox e
          WHERE e.kind = ${kind} AND e.state = 'pending' AND e.app_id = o.app_id
            AND (e.payload ->> 'conversation_id')::bigint
              = (o.payload ->> 'conversation_id')::bigint
            AND e.id < o.id
        )
      ORDER BY o.run_at
      LIMIT ${options.limit}
      FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE outbox o
      SET claimed_until = clock_timestamp() + make_interval(secs => ${options.leaseSeconds})
      FROM due WHERE o.app_id = due.app_id AND o.id = due.id
      RETURNING o.app_id, o.id, o.topic, o.payload, o.attempts, o.claimed_until
    )`;
}
