/**
 * WhatsApp's 24-hour window in SQL (SPEC §3): the customer's, counted from their last message in
 * any of their WhatsApp conversations. One definition for the reply being accepted (`replies.ts`)
 * and for its send when it is about to leave (`channel_sends.ts`).
 */
import type { PendingQuery, Row, Tx } from "./client.ts";
import { REPLY_WINDOW_HOURS } from "../domain/conversation.ts";

/**
 * Whether the window of the customer of conversation `conversation` (a table alias with
 * `app_id` and `client_id`) is open at `now`: false when they never wrote.
 */
export function replyWindowOpen(
  sql: Tx,
  conversation: string,
  now: PendingQuery<Row[]>,
): PendingQuery<Row[]> {
  const c = sql(conversation);
  return sql`coalesce((
    SELECT max(o.last_inbound_at) FROM conversations o
    WHERE o.app_id = ${c}.app_id AND o.client_id = ${c}.client_id AND o.channel = 'whatsapp'
  ) >= ${now} - make_interval(hours => ${REPLY_WINDOW_HOURS}), false)`;
}
