/**
 * Queues the Slack mirror of a batch (CONTRACT §6.2): an outbox row of kind `slack` for every new
 * message of an application installed in Slack — except the agent replies that came from Slack,
 * which are already in their thread — and for every conversation whose status changed (its root
 * message shows the status). The Slack sender posts them in conversation order. A message that
 * fails once in its thread gets one more post there, its "Not delivered" line.
 */
import type { PendingQuery, Row, Tx } from "./client.ts";

/** A change of the batch: a new message (with its conversation), a changed conversation. */
export interface MirroredChange {
  appId: number;
  messageId?: number;
  chatId?: number;
  chatChanged?: number;
}

/** Queues the mirror of `changes` for the applications in `slackApps`; resolves to the rows queued. */
export async function queueSlackMirror(
  sql: Tx,
  changes: MirroredChange[],
  slackApps: Set<number>,
): Promise<number> {
  const rows: { appId: number; chatId: number; messageId: number | null }[] = [];
  for (const change of changes) {
    if (!slackApps.has(change.appId)) continue;
    if (change.messageId !== undefined && change.chatId !== undefined) {
      rows.push({ appId: change.appId, chatId: change.chatId, messageId: change.messageId });
    }
    if (change.chatChanged !== undefined) {
      rows.push({ appId: change.appId, chatId: change.chatChanged, messageId: null });
    }
  }
  if (rows.length === 0) return 0;
  // A conversation's posts in the order of its messages (the batch lists its commands' own
  // messages before those of WhatsApp deliveries and Slack events), status changes after them.
  rows.sort((a, b) => (a.messageId ?? Infinity) - (b.messageId ?? Infinity));
  // The probe is a LATERAL with LIMIT 1 on purpose: as `NOT EXISTS` under the OR, PostgreSQL may
  // hash the subquery instead, reading every message of the application ever mirrored, per batch.
  const result = await sql`
    INSERT INTO outbox (app_id, kind, topic, payload)
    SELECT x.app_id, 'slack', CASE WHEN x.message_id IS NULL THEN 'chat' ELSE 'message' END,
      jsonb_strip_nulls(
        jsonb_build_object('conversation_id', x.chat_id, 'message_id', x.message_id))
    FROM unnest(
      ${rows.map((row) => row.appId)}::bigint[], ${rows.map((row) => row.chatId)}::bigint[],
      ${rows.map((row) => row.messageId)}::bigint[]
    ) WITH ORDINALITY AS x (app_id, chat_id, message_id, n)
    LEFT JOIN LATERAL (
      SELECT true AS found FROM slack_messages s
      WHERE s.app_id = x.app_id AND s.message_id = x.message_id
      LIMIT 1
    ) mirrored ON true
    WHERE mirrored.found IS NULL
    ORDER BY x.n`;
  return result.count;
}

/**
 * The `INSERT` (a `WITH` step of the statement that failed them) queueing the "Not delivered" line
 * of the messages of application `appId` in CTE `failed` (columns `id`, `conversation_id`) that
 * are in a Slack thread already, or whose post is still queued: one being posted now may have
 * read the message before it failed. A message's post counts its parts, so a post that showed the
 * failure already leaves the line nothing to add.
 */
export function queueNotDelivered(sql: Tx, appId: number, failed: string): PendingQuery<Row[]> {
  return sql`
    INSERT INTO outbox (app_id, kind, topic, payload)
    SELECT ${appId}, 'slack', 'message',
      jsonb_build_object('conversation_id', f.conversation_id, 'message_id', f.id)
    FROM ${sql(failed)} f
    WHERE EXISTS (SELECT 1 FROM slack_messages s WHERE s.app_id = ${appId} AND s.message_id = f.id)
      OR EXISTS (
        SELECT 1 FROM outbox o
        WHERE o.kind = 'slack' AND o.app_id = ${appId} AND o.state = 'pending'
          AND (o.payload ->> 'conversation_id')::bigint = f.conversation_id
          AND o.topic = 'message' AND (o.payload ->> 'message_id')::bigint = f.id)
    RETURNING 1`;
}
