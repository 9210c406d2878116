/** Queries of the `messages` table, and the row → {@linkcode Message} mapping every reader uses. */
import type { Tx } from "./client.ts";
import type { Message } from "../domain/conversation.ts";

/** The columns {@linkcode toMessage} reads, as selected from `messages`. */
export interface MessageRow {
  id: number;
  conversation_id: number;
  sender_type: Message["sender_type"];
  sender_name: string | null;
  message_type: string;
  content: string;
  payload: unknown;
  internal: boolean;
  status: Message["status"] | null;
  created_at: string;
}

/** Maps a stored row to the client-facing message object, leaving out empty optional fields. */
export function toMessage(row: MessageRow): Message {
  const message: Message = {
    id: row.id,
    chat_id: row.conversation_id,
    sender_type: row.sender_type,
    message_type: row.message_type,
    content: row.content,
    created_at: row.created_at,
  };
  if (row.sender_name !== null) message.sender_name = row.sender_name;
  if (row.payload !== null && row.payload !== undefined) message.payload = row.payload;
  if (row.internal) message.internal = true;
  if (row.status !== null) message.status = row.status;
  return message;
}

/** Result of {@linkcode appendVisitorMessage}. */
export interface AppendedVisitorMessage {
  chatId: number;
  messageId: number;
  /** True when this message opened a new conversation. */
  started: boolean;
}

/**
 * Stores a web visitor's message in one statement: into the visitor's open web conversation,
 * or a new one when there is none; updates the conversation's activity times; queues
 * `chat.started` and `message.received` for a subscribed webhook. Null when the application
 * has no such client.
 */
export async function appendVisitorMessage(
  sql: Tx,
  input: { appId: number; clientId: number; messageType: string; content: string },
): Promise<AppendedVisitorMessage | null> {
  const { appId, clientId } = input;
  const [row] = await sql<{ chat_id: number; message_id: number; started: boolean }[]>`
    WITH stamp AS (
      SELECT clock_timestamp() AS at
    ), client AS (
      SELECT id FROM clients WHERE app_id = ${appId} AND id = ${clientId}
    ), open_chat AS (
      SELECT id FROM conversations
      WHERE app_id = ${appId} AND client_id = ${clientId} AND channel = 'web' AND status = 'open'
      ORDER BY id DESC LIMIT 1
    ), new_chat AS (
      INSERT INTO conversations
        (app_id, client_id, channel, status, created_at, last_message_at, last_inbound_at)
      SELECT ${appId}, client.id, 'web', 'open', stamp.at, stamp.at, stamp.at
      FROM client, stamp WHERE NOT EXISTS (SELECT 1 FROM open_chat)
      RETURNING id
    ), chat AS (
      SELECT id, false AS started FROM open_chat
      UNION ALL
      SELECT id, true FROM new_chat
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, created_at)
      SELECT ${appId}, chat.id, 'visitor', ${input.messageType}, ${input.content}, stamp.at
      FROM chat, stamp
      RETURNING id, conversation_id
    ), touched AS (
      UPDATE conversations c SET last_message_at = stamp.at, last_inbound_at = stamp.at
      FROM open_chat, stamp WHERE c.app_id = ${appId} AND c.id = open_chat.id
    ), events AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', topic.name,
        jsonb_build_object('conversation_id', message.conversation_id, 'message_id', message.id)
      FROM message
      CROSS JOIN chat
      CROSS JOIN LATERAL (VALUES (1, 'chat.started'), (2, 'message.received')) AS topic (n, name)
      JOIN webhooks w ON w.app_id = ${appId} AND w.enabled AND topic.name = ANY (w.events)
      WHERE topic.name <> 'chat.started' OR chat.started
      ORDER BY topic.n
    )
    SELECT message.conversation_id AS chat_id, message.id AS message_id, chat.started
    FROM message, chat`;
  if (!row) return null;
  return { chatId: row.chat_id, messageId: row.message_id, started: row.started };
}

/** Options of {@linkcode listMessages}. */
export interface ListMessagesOptions {
  /** Most messages returned (the latest ones). */
  limit: number;
  /** Only messages with a smaller id. */
  before?: number;
  /** Whether internal notes are included (never for visitors). */
  includeInternal: boolean;
}

/** The latest messages of a conversation, oldest first; deleted messages are left out. */
export async function listMessages(
  sql: Tx,
  appId: number,
  chatId: number,
  options: ListMessagesOptions,
): Promise<Message[]> {
  const rows = await sql<MessageRow[]>`
    SELECT * FROM (
      SELECT id, conversation_id, sender_type, sender_name, message_type, content, payload,
        internal, status, created_at
      FROM messages
      WHERE app_id = ${appId} AND conversation_id = ${chatId} AND deleted_at IS NULL
        AND id < ${options.before ?? Number.MAX_SAFE_INTEGER}
        AND (${options.includeInternal} OR NOT internal)
      ORDER BY id DESC
      LIMIT ${options.limit}
    ) latest ORDER BY id`;
  return rows.map(toMessage);
}
