/**
 * Messages from the application's side into existing conversations (the Open API's bot, and
 * later agents and Flows), stored set-based like visitor messages: one statement for a run of
 * replies, because per-statement overhead is what group commit saves.
 */
import type { Tx } from "./client.ts";
import type { SendReplyCommand } from "../actors/protocol.ts";
import { OUTSIDE_WINDOW, OUTSIDE_WINDOW_CODE } from "../domain/conversation.ts";
import { buttonsOffered } from "../domain/message_kinds.ts";
import { replyWindowOpen } from "./reply_window.ts";

/**
 * A reply to store: the command without its kind, the Flow node that sends it if any, whether it
 * is an internal note (kept from the visitor, their channel and `message.sent`), and whether,
 * outside WhatsApp's window, it is kept as a failed message (a Flow's step: nobody to answer a
 * refusal) rather than refused.
 */
export type ReplyInput = Omit<SendReplyCommand, "kind" | "idempotency"> & {
  /**
   * The Idempotency-Key this transaction claimed for the reply (`idempotency_keys.ts`): stored
   * only while the claim is this transaction's, and the claim settled with the message.
   */
  idempotencyKey?: string;
  flowNode?: string;
  internal?: boolean;
  keepOutsideWindow?: boolean;
};

/** What became of one reply. */
export type AppendedReply =
  | { kind: "stored"; messageId: number; chatId: number; reopened: boolean }
  | { kind: "not_found" }
  | { kind: "outside_window" }
  /** Its Idempotency-Key is not this transaction's: an earlier request holds it. */
  | { kind: "held" }
  /** Kept outside the window (`keepOutsideWindow`): stored `failed`, `message.failed` queued. */
  | { kind: "failed"; messageId: number; chatId: number };

/**
 * Stores replies in input order, in one statement: each must name a conversation of its
 * application; a free-form reply to a WhatsApp conversation whose customer's window is closed
 * (`reply_window.ts`) is refused, or with `keepOutsideWindow` stored
 * `failed` (not sent, not moving the conversation, `message.failed` queued); the conversation is reopened and
 * its activity time moves to the statement's timestamp; `message.sent` is queued for a
 * subscribed webhook; a reply to a WhatsApp conversation is stored `pending` and queued for the
 * channel's sender. A reply that offers buttons becomes a message the conversation waits on for a
 * click: a Flow's is the Flow's current step (with its node), the bot's or an agent's is clickable
 * beside it and drives no Flow (for each, the last such reply of a conversation wins).
 * `reopened` is true on the first reply of a conversation that was closed. A reply with an
 * Idempotency-Key is stored only while its claim is this transaction's (`held` otherwise); its
 * claim then names the message, or is given back when nothing was stored. Also answers how many
 * webhook events were queued.
 */
export async function appendReplies(
  sql: Tx,
  inputs: ReplyInput[],
): Promise<{ replies: AppendedReply[]; queuedEvents: number }> {
  const actionable = inputs.map((i) =>
    buttonsOffered(i.messageType, i.payload).length > 0 ? "t" : "f"
  );
  const rows = await sql<
    {
      n: number;
      status: string;
      outside_window: boolean;
      held: boolean;
      message_id: number | null;
      queued: number;
    }[]
  >`
    WITH stamp AS (
      SELECT clock_timestamp() AS at
    ), input AS (
      SELECT * FROM unnest(
        ${inputs.map((i) => i.appId)}::bigint[], ${inputs.map((i) => i.chatId)}::bigint[],
        ${inputs.map((i) => i.senderType)}::text[], ${inputs.map((i) => i.senderName)}::text[],
        ${inputs.map((i) => i.messageType)}::text[], ${inputs.map((i) => i.content)}::text[],
        ${inputs.map((i) => i.payload === null ? null : JSON.stringify(i.payload))}::text[],
        ${inputs.map((i) => i.flowNode ?? null)}::text[],
        ${actionable}::text[]::boolean[],
        ${inputs.map((i) => i.internal ? "t" : "f")}::text[]::boolean[],
        ${inputs.map((i) => i.keepOutsideWindow ? "t" : "f")}::text[]::boolean[],
        ${inputs.map((i) => i.idempotencyKey ?? null)}::text[]
      ) WITH ORDINALITY AS input (app_id, chat_id, sender_type, sender_name, message_type,
        content, payload, flow_node, actionable, internal, keep_outside_window, idempotency_key,
        n)
    ), target AS (
      SELECT i.*, c.status, c.client_id,
        -- Where the reply goes: an internal note stays in Parley (and Slack).
        CASE WHEN i.internal THEN 'internal' ELSE c.channel END AS route,
        i.message_type <> 'template' AND NOT i.internal AND c.window_closed AS outside_window,
        -- A claim of this transaction has no message yet; another's committed with its message.
        i.idempotency_key IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM idempotency_keys k
          WHERE k.app_id = i.app_id AND k.key = i.idempotency_key AND k.message_id IS NULL
        ) AS held
      FROM input i CROSS JOIN stamp
      CROSS JOIN LATERAL (
        SELECT status, channel, client_id, CASE WHEN c.channel = 'whatsapp'
            THEN NOT ${replyWindowOpen(sql, "c", sql`stamp.at`)} ELSE false END AS window_closed
        FROM conversations c
        WHERE c.app_id = i.app_id AND c.id = i.chat_id
      ) c
    ), accepted AS (
      SELECT *, row_number() OVER (ORDER BY n) AS k FROM target
      WHERE (NOT outside_window OR keep_outside_window) AND NOT held
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, sender_name, message_type,
        content, payload, internal, status, failure_code, failure_title, created_at)
      SELECT a.app_id, a.chat_id, a.sender_type, a.sender_name, a.message_type, a.content,
        a.payload::jsonb, a.internal,
        CASE WHEN a.outside_window THEN 'failed' WHEN a.route = 'whatsapp' THEN 'pending' END,
        CASE WHEN a.outside_window THEN ${OUTSIDE_WINDOW_CODE}::int END,
        CASE WHEN a.outside_window THEN ${OUTSIDE_WINDOW}::text END, stamp.at
      FROM accepted a CROSS JOIN stamp
      ORDER BY a.k
      RETURNING id
    ), result AS (
      -- The k-th id drawn belongs to the k-th accepted reply: zipped as arrays, in linear time
      -- (a join on the row number gets a nested loop from the generic plan's estimates).
      SELECT * FROM unnest(
        ARRAY(SELECT n FROM accepted ORDER BY k), ARRAY(SELECT app_id FROM accepted ORDER BY k),
        ARRAY(SELECT chat_id FROM accepted ORDER BY k),
        ARRAY(SELECT flow_node FROM accepted ORDER BY k),
        ARRAY(SELECT actionable FROM accepted ORDER BY k),
        ARRAY(SELECT route FROM accepted ORDER BY k),
        ARRAY(SELECT outside_window FROM accepted ORDER BY k),
        ARRAY(SELECT client_id FROM accepted ORDER BY k),
        ARRAY(SELECT idempotency_key FROM accepted ORDER BY k),
        ARRAY(SELECT id FROM message ORDER BY id)
      ) AS result (n, app_id, chat_id, flow_node, actionable, route, failed, client_id,
        idempotency_key, message_id)
    ), keyed AS (
      UPDATE idempotency_keys k SET message_id = r.message_id
      FROM result r
      WHERE r.idempotency_key IS NOT NULL AND k.app_id = r.app_id AND k.key = r.idempotency_key
    ), unkept AS (
      -- A claim whose reply stored nothing is given back: the request may be tried again.
      DELETE FROM idempotency_keys k USING input i
      WHERE i.idempotency_key IS NOT NULL AND k.app_id = i.app_id
        AND k.key = i.idempotency_key AND k.message_id IS NULL
        AND i.n NOT IN (SELECT n FROM accepted)
    ), waiting AS (
      -- The Flow's newest step with buttons, and apart from it the bot's or an agent's.
      SELECT app_id, chat_id,
        (array_agg(message_id ORDER BY n DESC)
          FILTER (WHERE actionable AND flow_node IS NOT NULL))[1] AS flow_message_id,
        (array_agg(flow_node ORDER BY n DESC)
          FILTER (WHERE actionable AND flow_node IS NOT NULL))[1] AS flow_node,
        (array_agg(message_id ORDER BY n DESC)
          FILTER (WHERE actionable AND flow_node IS NULL))[1] AS reply_message_id
      -- Internal notes leave the conversation as the visitor sees it: neither reopened nor moved;
      -- so do the replies that failed, which the visitor never saw.
      FROM result WHERE route <> 'internal' AND NOT failed GROUP BY app_id, chat_id
    ), touched AS (
      UPDATE conversations c
      SET last_message_at = stamp.at, status = 'open', closed_at = NULL,
        action_message_id = COALESCE(w.flow_message_id, c.action_message_id),
        flow_node = CASE WHEN w.flow_message_id IS NULL THEN c.flow_node ELSE w.flow_node END,
        reply_action_message_id = COALESCE(w.reply_message_id, c.reply_action_message_id)
      FROM waiting w CROSS JOIN stamp
      WHERE c.app_id = w.app_id AND c.id = w.chat_id
    ), events AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT r.app_id, 'webhook', event.topic,
        jsonb_build_object('conversation_id', r.chat_id, 'message_id', r.message_id)
          || CASE WHEN r.failed THEN '{}'::jsonb ELSE jsonb_build_object('conversation',
            jsonb_build_object('status', 'open', 'last_message_at', stamp.at)) END
      FROM result r CROSS JOIN stamp
      CROSS JOIN LATERAL (
        SELECT CASE WHEN r.failed THEN 'message.failed' ELSE 'message.sent' END AS topic
      ) event
      CROSS JOIN LATERAL (
        SELECT 1 FROM webhooks w
        WHERE w.app_id = r.app_id AND w.enabled AND event.topic = ANY (w.events) LIMIT 1
      ) subscribed
      WHERE r.route <> 'internal'
      ORDER BY r.n
      RETURNING 1
    ), sends AS (
      -- Conversations on a channel are sent there by the channel's sender, from the outbox.
      INSERT INTO outbox (app_id, kind, topic, payload)
      -- In order per customer (channel_claims.ts): their client rides along.
      SELECT r.app_id, 'whatsapp', 'send', jsonb_build_object('conversation_id', r.chat_id,
          'message_id', r.message_id, 'client_id', r.client_id)
      FROM result r WHERE r.route = 'whatsapp' AND NOT r.failed
      ORDER BY r.n
      RETURNING 1
    )
    SELECT t.n, t.status, t.outside_window, t.held, r.message_id,
      ((SELECT count(*) FROM events) + (SELECT count(*) FROM sends))::int AS queued
    FROM target t LEFT JOIN result r ON r.n = t.n`;
  const byInput = new Map(rows.map((row) => [row.n, row]));
  const reopened = new Set<string>();
  const replies = inputs.map((input, index): AppendedReply => {
    const row = byInput.get(index + 1);
    if (!row) return { kind: "not_found" };
    if (row.held) return { kind: "held" };
    if (row.message_id === null) return { kind: "outside_window" };
    if (row.outside_window) {
      return { kind: "failed", messageId: row.message_id, chatId: input.chatId };
    }
    const chat = `${input.appId}:${input.chatId}`;
    const first = row.status === "closed" && !input.internal && !reopened.has(chat);
    if (first) reopened.add(chat);
    return { kind: "stored", messageId: row.message_id, chatId: input.chatId, reopened: first };
  });
  return { replies, queuedEvents: rows[0]?.queued ?? 0 };
}
