/**
 * Button clicks (CONTRACT §3, `POST /api/v1/widget/actions`): a click is accepted only on the
 * message whose buttons the conversation waits on, and only once. One statement checks it,
 * consumes the wait, stores the click as the visitor's message and queues `message.received`,
 * so a click runs in the actors' pipelined batch like any other write.
 */
import type { Tx } from "./client.ts";
import { NOT_BLANK } from "../domain/rich_content.ts";

/** A click to accept. */
export interface ActionInput {
  appId: number;
  /** The client clicking: the conversation must be theirs. */
  clientId: number;
  chatId: number;
  messageId: number;
  /** The id of the clicked button. */
  actionId: string;
}

/** What became of a click. */
export type AcceptedAction =
  | {
    kind: "accepted";
    /** The visitor message that records the click. */
    messageId: number;
    /** The Flow node whose message was clicked; null when the message was not a Flow's. */
    flowNode: string | null;
    /** Webhook events queued (`message.received` when subscribed). */
    queuedEvents: number;
  }
  | { kind: "not_found" }
  | { kind: "unknown_action" }
  | { kind: "stale" };

/**
 * Accepts a click in one statement: the conversation must be the client's (else `not_found`),
 * the message one of its visible messages offering a button `actionId` (else `unknown_action`),
 * and the conversation open and waiting on that message (else `stale`: an old message, a
 * repeated click, a closed conversation). An accepted click clears the wait, is stored as a
 * `text` visitor message holding the button's title, moves the conversation's activity times
 * (not the inbound time of a WhatsApp conversation: only the customer's messages reopen its
 * 24-hour window) and queues `message.received` for a subscribed webhook.
 */
export async function acceptAction(sql: Tx, input: ActionInput): Promise<AcceptedAction> {
  const [row] = await sql<
    {
      chat_found: boolean;
      title: string | null;
      message_id: number | null;
      flow_node: string | null;
      queued: number;
    }[]
  >`
    WITH stamp AS (
      SELECT clock_timestamp() AS at
    ), chat AS (
      SELECT id, status, action_message_id, flow_node, reply_action_message_id FROM conversations
      WHERE app_id = ${input.appId} AND id = ${input.chatId} AND client_id = ${input.clientId}
      FOR UPDATE
    ), button AS (
      -- The buttons buttonsOffered() finds: a template's quick reply is titled by its payload,
      -- and one whose payload is blank is none (no button id is blank).
      SELECT COALESCE(
        jsonb_path_query_first(m.payload, '$.buttons[*] ? (@.id == $id)', v.vars) ->> 'title',
        jsonb_path_query_first(m.payload, '$.cards[*].buttons[*] ? (@.id == $id)', v.vars)
          ->> 'title',
        jsonb_path_query_first(m.payload,
          '$.components[*] ? (@.type == "button" && @.sub_type == "quick_reply")'
          ' .parameters[*] ? (@.type == "payload" && @.payload == $id)', v.vars) ->> 'payload'
      ) AS title
      FROM messages m
      JOIN chat ON chat.id = m.conversation_id
      CROSS JOIN (SELECT jsonb_build_object('id', ${input.actionId}::text) AS vars) v
      WHERE m.app_id = ${input.appId} AND m.conversation_id = ${input.chatId}
        AND m.id = ${input.messageId}
        AND m.message_type IN ('buttons', 'card', 'carousel', 'template')
        AND NOT m.internal AND m.deleted_at IS NULL AND ${NOT_BLANK.test(input.actionId)}
    ), accepted AS (
      -- The Flow's current step moves the Flow on; the bot's or an agent's buttons take one
      -- click and leave the Flow where it waits.
      UPDATE conversations c
      SET action_message_id = CASE WHEN flow_step THEN NULL ELSE c.action_message_id END,
        flow_node = CASE WHEN flow_step THEN NULL ELSE c.flow_node END,
        reply_action_message_id = CASE WHEN flow_step THEN c.reply_action_message_id END,
        last_message_at = stamp.at,
        -- A WhatsApp conversation's 24-hour window counts from the customer's own messages
        -- (their platform time); a click here came from Slack, on their behalf.
        last_inbound_at = CASE WHEN c.channel = 'whatsapp' THEN c.last_inbound_at ELSE stamp.at END
      FROM chat, button, stamp,
        LATERAL (SELECT chat.action_message_id = ${input.messageId} AS flow_step) step
      WHERE c.app_id = ${input.appId} AND c.id = chat.id AND chat.status = 'open'
        AND ${input.messageId} IN (chat.action_message_id, chat.reply_action_message_id)
        AND button.title IS NOT NULL
      RETURNING CASE WHEN step.flow_step THEN chat.flow_node END AS flow_node, button.title,
        stamp.at
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, created_at)
      SELECT ${input.appId}, ${input.chatId}, 'visitor', 'text', a.title, a.at FROM accepted a
      RETURNING id
    ), event AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${input.appId}, 'webhook', 'message.received',
        jsonb_build_object('conversation_id', ${input.chatId}::bigint, 'message_id', message.id,
          'conversation', jsonb_build_object('status', 'open', 'last_message_at', a.at))
      FROM message CROSS JOIN accepted a JOIN webhooks w ON w.app_id = ${input.appId} AND w.enabled
        AND 'message.received' = ANY (w.events)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM chat) AS chat_found,
      (SELECT title FROM button) AS title,
      (SELECT id FROM message) AS message_id,
      (SELECT flow_node FROM accepted) AS flow_node,
      (SELECT count(*) FROM event)::int AS queued`;
  if (!row.chat_found) return { kind: "not_found" };
  if (row.title === null) return { kind: "unknown_action" };
  if (row.message_id === null) return { kind: "stale" };
  return {
    kind: "accepted",
    messageId: row.message_id,
    flowNode: row.flow_node,
    queuedEvents: row.queued,
  };
}
