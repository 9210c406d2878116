/** Queries of the `messages` table, and the row → {@linkcode Message} mapping every reader uses. */
import type { Tx } from "./client.ts";
import type { Message } from "../domain/conversation.ts";
import type { AdReferral } from "../domain/ad_referral.ts";

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
  /** The platform's error of a failed message, where the query selects it. */
  failure_code?: number | null;
  failure_title?: string | null;
  /** The ad a WhatsApp customer's message came from, where the query selects it. */
  referral?: AdReferral | null;
  /** Set by the event announcing the message's deletion (a Slack reply deleted). */
  deleted?: boolean;
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
  if (row.referral !== null && row.referral !== undefined) message.referral = row.referral;
  if (row.deleted) message.deleted = true;
  if (row.status === "failed" && row.failure_code !== null && row.failure_code !== undefined) {
    message.error = { code: row.failure_code, title: row.failure_title ?? null };
  }
  return message;
}

/** A web visitor's message to store. */
export interface VisitorMessageInput {
  appId: number;
  clientId: number;
  messageType: string;
  content: string;
  /** The validated document of a rich kind; absent or null for text. */
  payload?: unknown;
}

/** Result of {@linkcode appendVisitorMessages} for one input. */
export interface AppendedVisitorMessage {
  chatId: number;
  messageId: number;
  /** True when this message opened a new conversation. */
  started: boolean;
}

/**
 * Stores web visitors' messages, in input order, in one statement: each goes into its
 * visitor's open web conversation, or a new one when there is none (all messages of one
 * visitor share it); conversations' activity times move to the statement's timestamp, which
 * is also every new message's `created_at`; `chat.started` and `message.received` are queued
 * for subscribed webhooks. One statement for a whole batch is what makes group commit cheap:
 * the per-statement cost of PostgreSQL dominates single-row writes. Returns one result per
 * input, null where the application has no such client, and how many webhook events it queued.
 */
export async function appendVisitorMessages(
  sql: Tx,
  inputs: VisitorMessageInput[],
): Promise<{ messages: (AppendedVisitorMessage | null)[]; queuedEvents: number }> {
  const rows = await sql<
    { n: number; chat_id: number; message_id: number; started: boolean; queued: number }[]
  >`
    WITH stamp AS (
      SELECT clock_timestamp() AS at
    ), input AS (
      SELECT * FROM unnest(
        ${inputs.map((i) => i.appId)}::bigint[], ${inputs.map((i) => i.clientId)}::bigint[],
        ${inputs.map((i) => i.messageType)}::text[], ${inputs.map((i) => i.content)}::text[],
        ${inputs.map((i) => i.payload == null ? null : JSON.stringify(i.payload))}::text[]
      ) WITH ORDINALITY AS input (app_id, client_id, message_type, content, payload, n)
    ), sender AS (
      SELECT DISTINCT app_id, client_id FROM input
    ), open_chat AS (
      -- LATERAL keeps every lookup an index probe: a generic plan guesses 100 input rows
      -- and would otherwise hash whole tables.
      SELECT s.app_id, s.client_id, c.id
      FROM sender s
      CROSS JOIN LATERAL (
        SELECT id FROM conversations c
        WHERE c.app_id = s.app_id AND c.client_id = s.client_id AND c.channel = 'web'
          AND c.status = 'open'
        ORDER BY c.id DESC LIMIT 1
      ) c
    ), new_chat AS (
      -- An open conversation proves its client exists (foreign key), so only a sender without
      -- one is looked up: one probe less for most messages. An unknown client gets nothing.
      INSERT INTO conversations
        (app_id, client_id, channel, status, created_at, last_message_at, last_inbound_at)
      SELECT s.app_id, s.client_id, 'web', 'open', stamp.at, stamp.at, stamp.at
      FROM (
        SELECT * FROM sender s
        WHERE NOT EXISTS (
          SELECT 1 FROM open_chat o WHERE o.app_id = s.app_id AND o.client_id = s.client_id
        )
        OFFSET 0 -- filter first, then probe
      ) s
      CROSS JOIN LATERAL (
        SELECT 1 FROM clients cl WHERE cl.app_id = s.app_id AND cl.id = s.client_id LIMIT 1
      ) known
      CROSS JOIN stamp
      RETURNING app_id, client_id, id
    ), chat AS (
      SELECT app_id, client_id, id, false AS new FROM open_chat
      UNION ALL
      SELECT app_id, client_id, id, true FROM new_chat
    ), placed AS (
      -- Inputs whose visitor exists, numbered in input order; ids are drawn in this order.
      SELECT i.n, i.app_id, i.message_type, i.content, i.payload, chat.id AS chat_id,
        chat.new AND i.n = min(i.n) OVER (PARTITION BY i.app_id, i.client_id) AS started,
        row_number() OVER (ORDER BY i.n) AS k
      FROM input i JOIN chat ON chat.app_id = i.app_id AND chat.client_id = i.client_id
    ), message AS (
      INSERT INTO messages
        (app_id, conversation_id, sender_type, message_type, content, payload, created_at)
      SELECT p.app_id, p.chat_id, 'visitor', p.message_type, p.content, p.payload::jsonb, stamp.at
      FROM placed p CROSS JOIN stamp
      ORDER BY p.k
      RETURNING id
    ), result AS (
      -- The k-th id drawn belongs to the k-th placed input: zipped as arrays, in linear time
      -- (a join on the row number gets a nested loop from the generic plan's estimates).
      SELECT * FROM unnest(
        ARRAY(SELECT n FROM placed ORDER BY k), ARRAY(SELECT app_id FROM placed ORDER BY k),
        ARRAY(SELECT chat_id FROM placed ORDER BY k), ARRAY(SELECT started FROM placed ORDER BY k),
        ARRAY(SELECT id FROM message ORDER BY id)
      ) AS result (n, app_id, chat_id, started, message_id)
    ), touched AS (
      UPDATE conversations c SET last_message_at = stamp.at, last_inbound_at = stamp.at
      FROM open_chat o CROSS JOIN stamp
      WHERE c.app_id = o.app_id AND c.id = o.id
    ), events AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT r.app_id, 'webhook', topic.name,
        jsonb_build_object('conversation_id', r.chat_id, 'message_id', r.message_id,
          'conversation', jsonb_build_object('status', 'open', 'last_message_at', stamp.at))
      FROM result r CROSS JOIN stamp
      CROSS JOIN LATERAL (VALUES (1, 'chat.started'), (2, 'message.received')) AS topic (i, name)
      CROSS JOIN LATERAL (
        SELECT 1 FROM webhooks w
        WHERE w.app_id = r.app_id AND w.enabled AND topic.name = ANY (w.events) LIMIT 1
      ) subscribed
      WHERE topic.name <> 'chat.started' OR r.started
      ORDER BY r.n, topic.i
      RETURNING 1
    )
    SELECT n, chat_id, message_id, started, (SELECT count(*) FROM events)::int AS queued
    FROM result`;
  const byInput = new Map(rows.map((row) => [row.n, row]));
  return {
    messages: inputs.map((_, index) => {
      const row = byInput.get(index + 1);
      return row ? { chatId: row.chat_id, messageId: row.message_id, started: row.started } : null;
    }),
    queuedEvents: rows[0]?.queued ?? 0,
  };
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
        internal, status, failure_code, failure_title, referral, created_at
      FROM messages
      WHERE app_id = ${appId} AND conversation_id = ${chatId} AND deleted_at IS NULL
        AND id < ${options.before ?? Number.MAX_SAFE_INTEGER}
        AND (${options.includeInternal} OR NOT internal)
      ORDER BY id DESC
      LIMIT ${options.limit}
    ) latest ORDER BY id`;
  return rows.map(toMessage);
}
