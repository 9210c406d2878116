/**
 * What a WhatsApp webhook delivery writes (CONTRACT §6.1): customers' messages into the same
 * conversations, outbox and notices as the widget's, clicks into the Flow's entry point, and
 * status receipts onto Parley's outbound messages. One statement per update, so that a delivery
 * runs pipelined in the actors' batch; every statement is idempotent by WhatsApp's ids, because
 * Meta delivers the same update again for days when it misses an answer.
 */
import { Buffer } from "node:buffer";
import type { Tx } from "./client.ts";
import type { WhatsAppInboundEntry } from "../actors/protocol.ts";

type MessageEntry = Extract<WhatsAppInboundEntry, { kind: "message" }>;
type ClickEntry = Extract<WhatsAppInboundEntry, { kind: "click" }>;
type StatusEntry = Extract<WhatsAppInboundEntry, { kind: "status" }>;

/** What storing a customer's message did; null when its wamid was already stored. */
export interface StoredInbound {
  chatId: number;
  messageId: number;
  /** Whether it opened the conversation. */
  started: boolean;
  queuedEvents: number;
}

/**
 * Stores a customer's message in one statement: the customer becomes (or is) the client known
 * by their `wa_id` (a profile name fills an empty name), the message goes into their open
 * WhatsApp conversation or a new one, keeps the platform's timestamp, moves the conversation's
 * last inbound time (which the 24-hour window counts from) and queues `chat.started` and
 * `message.received` for a subscribed webhook. A wamid already stored changes nothing.
 */
export async function storeWhatsAppMessage(
  sql: Tx,
  appId: number,
  entry: MessageEntry,
): Promise<StoredInbound | null> {
  const [row] = await sql<
    { chat_id: number; message_id: number; started: boolean; queued: number }[]
  >`
    WITH stamp AS (
      SELECT clock_timestamp() AS at, ${entry.timestamp}::timestamptz AS sent_at
    ), fresh AS (
      SELECT 1 WHERE NOT EXISTS (
        SELECT 1 FROM messages WHERE app_id = ${appId} AND external_id = ${entry.wamid}
      )
    ), known AS (
      SELECT client_id FROM client_identities
      WHERE app_id = ${appId} AND channel = 'whatsapp' AND external_id = ${entry.waId}
    ), new_client AS (
      INSERT INTO clients (app_id, name)
      SELECT ${appId}, ${entry.name} FROM fresh WHERE NOT EXISTS (SELECT 1 FROM known)
      RETURNING id
    ), new_identity AS (
      INSERT INTO client_identities (app_id, channel, external_id, client_id)
      SELECT ${appId}, 'whatsapp', ${entry.waId}, id FROM new_client
      RETURNING client_id
    ), client AS (
      SELECT client_id FROM known UNION ALL SELECT client_id FROM new_identity
    ), named AS (
      UPDATE clients c SET name = ${entry.name}
      FROM known k, fresh
      WHERE c.app_id = ${appId} AND c.id = k.client_id AND c.name IS NULL
        AND ${entry.name}::text IS NOT NULL
    ), open_chat AS (
      SELECT c.id FROM conversations c, client, fresh
      WHERE c.app_id = ${appId} AND c.client_id = client.client_id AND c.channel = 'whatsapp'
        AND c.status = 'open'
      ORDER BY c.id DESC LIMIT 1
    ), new_chat AS (
      INSERT INTO conversations
        (app_id, client_id, channel, status, created_at, last_message_at, last_inbound_at)
      SELECT ${appId}, client.client_id, 'whatsapp', 'open', stamp.at, stamp.at, stamp.sent_at
      FROM client, stamp, fresh
      WHERE NOT EXISTS (SELECT 1 FROM open_chat)
      RETURNING id
    ), chat AS (
      SELECT id, false AS started FROM open_chat UNION ALL SELECT id, true FROM new_chat
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, payload,
        external_id, platform_timestamp, created_at)
      SELECT ${appId}, chat.id, 'visitor', ${entry.messageType}, ${entry.content},
        ${entry.payload === null ? null : JSON.stringify(entry.payload)}::text::jsonb,
        ${entry.wamid}, stamp.sent_at, stamp.at
      FROM chat, stamp
      RETURNING id, conversation_id
    ), touched AS (
      UPDATE conversations c SET last_message_at = stamp.at,
        last_inbound_at = GREATEST(c.last_inbound_at, stamp.sent_at)
      FROM open_chat o, stamp
      WHERE c.app_id = ${appId} AND c.id = o.id
    ), events AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', topic.name,
        jsonb_build_object('conversation_id', m.conversation_id, 'message_id', m.id)
      FROM message m, chat
      CROSS JOIN LATERAL (VALUES (1, 'chat.started'), (2, 'message.received')) AS topic (i, name)
      CROSS JOIN LATERAL (
        SELECT 1 FROM webhooks w
        WHERE w.app_id = ${appId} AND w.enabled AND topic.name = ANY (w.events) LIMIT 1
      ) subscribed
      WHERE topic.name <> 'chat.started' OR chat.started
      ORDER BY topic.i
      RETURNING 1
    )
    SELECT m.conversation_id AS chat_id, m.id AS message_id, chat.started,
      (SELECT count(*) FROM events)::int AS queued
    FROM message m, chat`;
  return row
    ? {
      chatId: row.chat_id,
      messageId: row.message_id,
      started: row.started,
      queuedEvents: row.queued,
    }
    : null;
}

/** What storing a click did; null when its wamid was already stored. */
export interface StoredClick {
  messageId: number;
  /** The Flow node whose buttons were waiting, when the click was accepted on a Flow message. */
  flowNode: string | null;
  /** Whether the click was on the message the conversation waits on (else only stored). */
  accepted: boolean;
  queuedEvents: number;
}

/**
 * Stores a customer's click on a reply button or list row as their message (the button's
 * title, with its wamid and platform timestamp) and, when the conversation is open and waits on
 * exactly that message, consumes the wait like a widget click. A click that is stale stays a
 * plain message: the customer did say it, and WhatsApp has nobody to answer 409 to.
 */
export async function storeWhatsAppClick(
  sql: Tx,
  appId: number,
  entry: ClickEntry,
): Promise<StoredClick | null> {
  const [row] = await sql<
    { message_id: number; flow_node: string | null; accepted: boolean; queued: number }[]
  >`
    WITH stamp AS (
      SELECT clock_timestamp() AS at, ${entry.timestamp}::timestamptz AS sent_at
    ), chat AS (
      SELECT c.id, c.status, c.action_message_id, c.flow_node
      FROM conversations c
      JOIN client_identities i ON i.app_id = c.app_id AND i.client_id = c.client_id
        AND i.channel = 'whatsapp' AND i.external_id = ${entry.waId}
      WHERE c.app_id = ${appId} AND c.id = ${entry.chatId} AND c.status = 'open'
        AND NOT EXISTS (
          SELECT 1 FROM messages WHERE app_id = ${appId} AND external_id = ${entry.wamid}
        )
      FOR UPDATE OF c
    ), accepted AS (
      UPDATE conversations c SET action_message_id = NULL, flow_node = NULL
      FROM chat
      WHERE c.app_id = ${appId} AND c.id = chat.id AND chat.status = 'open'
        AND chat.action_message_id = ${entry.messageId}
      RETURNING chat.flow_node
    ), touched AS (
      UPDATE conversations c SET last_message_at = stamp.at,
        last_inbound_at = GREATEST(c.last_inbound_at, stamp.sent_at)
      FROM chat, stamp
      WHERE c.app_id = ${appId} AND c.id = chat.id
    ), message AS (
      INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content,
        external_id, platform_timestamp, created_at)
      SELECT ${appId}, chat.id, 'visitor', 'text', ${entry.title}, ${entry.wamid}, stamp.sent_at,
        stamp.at
      FROM chat, stamp
      RETURNING id
    ), event AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', 'message.received',
        jsonb_build_object('conversation_id', ${entry.chatId}::bigint, 'message_id', message.id)
      FROM message JOIN webhooks w ON w.app_id = ${appId} AND w.enabled
        AND 'message.received' = ANY (w.events)
      RETURNING 1
    )
    SELECT message.id AS message_id, (SELECT flow_node FROM accepted) AS flow_node,
      EXISTS (SELECT 1 FROM accepted) AS accepted, (SELECT count(*) FROM event)::int AS queued
    FROM message`;
  return row
    ? {
      messageId: row.message_id,
      flowNode: row.flow_node,
      accepted: row.accepted,
      queuedEvents: row.queued,
    }
    : null;
}

/** What a status receipt changed; null when it moved nothing (unknown id, or not forward). */
export interface AppliedStatus {
  chatId: number;
  messageId: number;
  queuedEvents: number;
}

/**
 * Moves an outbound message's status forward only (sent → delivered → read; `failed` is final
 * and keeps the platform's error code and title), and queues `message.updated` — or
 * `message.failed` — for a subscribed webhook. A receipt for an unknown wamid, or one that would
 * move the status back, changes nothing.
 */
export async function applyWhatsAppStatus(
  sql: Tx,
  appId: number,
  entry: StatusEntry,
): Promise<AppliedStatus | null> {
  const [row] = await sql<{ chat_id: number; message_id: number; queued: number }[]>`
    WITH part AS (
      SELECT message_id, conversation_id FROM whatsapp_sent_parts
      WHERE app_id = ${appId} AND wamid = ${entry.wamid}
    ), target AS (
      SELECT m.id, m.conversation_id FROM messages m, part
      WHERE m.app_id = ${appId} AND m.conversation_id = part.conversation_id
        AND m.id = part.message_id
        AND m.sender_type <> 'visitor'
        AND array_position(ARRAY['pending', 'sent', 'delivered', 'read', 'failed'],
          COALESCE(m.status, 'pending'))
          < array_position(ARRAY['pending', 'sent', 'delivered', 'read', 'failed'],
            ${entry.status}::text)
        AND m.status IS DISTINCT FROM 'failed'
    ), moved AS (
      UPDATE messages m SET status = ${entry.status}, updated_at = clock_timestamp(),
        failure_code = ${entry.error?.code ?? null}::int,
        failure_title = ${entry.error?.title ?? null}::text
      FROM target t WHERE m.app_id = ${appId} AND m.id = t.id
      RETURNING m.id, m.conversation_id
    ), event AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', topic.name,
        jsonb_build_object('conversation_id', moved.conversation_id, 'message_id', moved.id)
      FROM moved
      CROSS JOIN (SELECT CASE WHEN ${entry.status}::text = 'failed' THEN 'message.failed'
        ELSE 'message.updated' END AS name) topic
      JOIN webhooks w ON w.app_id = ${appId} AND w.enabled AND topic.name = ANY (w.events)
      RETURNING 1
    )
    SELECT conversation_id AS chat_id, id AS message_id, (SELECT count(*) FROM event)::int AS queued
    FROM moved`;
  return row ? { chatId: row.chat_id, messageId: row.message_id, queuedEvents: row.queued } : null;
}

/** Marks a stored webhook delivery processed (in the transaction that applied it). */
export async function markWhatsAppDeliveryProcessed(
  sql: Tx,
  appId: number,
  deliveryId: number,
): Promise<void> {
  await sql`
    UPDATE whatsapp_deliveries SET processed_at = clock_timestamp()
    WHERE app_id = ${appId} AND id = ${deliveryId}`;
}

/**
 * Stores webhook deliveries' raw bytes before they are acknowledged, in one statement; returns
 * their ids in order.
 */
export async function insertWhatsAppDeliveries(
  sql: Tx,
  deliveries: { appId: number; body: Uint8Array }[],
): Promise<number[]> {
  const rows = await sql<{ id: number }[]>`
    INSERT INTO whatsapp_deliveries (app_id, body)
    SELECT d.app_id, decode(d.body, 'base64')
    FROM unnest(${deliveries.map((d) => d.appId)}::bigint[],
      ${deliveries.map((d) => Buffer.from(d.body).toString("base64"))}::text[])
      WITH ORDINALITY AS d (app_id, body, n)
    ORDER BY d.n
    RETURNING id`;
  // Ids are drawn in insertion order.
  return rows.map((row) => row.id).sort((a, b) => a - b);
}

/** How often recovery tries to apply a stored request before it leaves it for an operator. */
export const MAX_APPLY_ATTEMPTS = 5;

/** Counts a failed application of a stored delivery, with why. */
export async function recordWhatsAppDeliveryFailure(
  sql: Tx,
  appId: number,
  id: number,
  error: string,
): Promise<void> {
  await sql`
    UPDATE whatsapp_deliveries SET attempts = attempts + 1, last_error = ${error.slice(0, 1000)}
    WHERE app_id = ${appId} AND id = ${id}`;
}

/** Deliveries still unprocessed after `olderThanSeconds` (a crash came between ack and apply). */
export async function findUnprocessedWhatsAppDeliveries(
  sql: Tx,
  olderThanSeconds: number,
  limit: number,
): Promise<{ appId: number; id: number; body: Uint8Array }[]> {
  const rows = await sql<{ app_id: number; id: number; body: Uint8Array }[]>`
    SELECT app_id, id, body FROM whatsapp_deliveries
    WHERE processed_at IS NULL AND attempts < ${MAX_APPLY_ATTEMPTS}
      AND received_at < clock_timestamp() - make_interval(secs => ${olderThanSeconds})
    ORDER BY received_at LIMIT ${limit}`;
  return rows.map((row) => ({ appId: row.app_id, id: row.id, body: row.body }));
}

/** An outbound message a customer's click names (by the wamid of one of its parts). */
export interface ClickTarget {
  wamid: string;
  messageId: number;
  chatId: number;
  messageType: string;
  payload: unknown;
  chatOpen: boolean;
  /** The customer the conversation is with. */
  waId: string | null;
}

/** The messages that the wamids of clicked messages name, for resolving their button ids. */
export async function findClickTargets(
  sql: Tx,
  appId: number,
  wamids: string[],
): Promise<ClickTarget[]> {
  if (wamids.length === 0) return [];
  const rows = await sql<
    {
      wamid: string;
      message_id: number;
      chat_id: number;
      message_type: string;
      payload: unknown;
      status: string;
      wa_id: string | null;
    }[]
  >`
    SELECT p.wamid, m.id AS message_id, m.conversation_id AS chat_id, m.message_type, m.payload,
      c.status, i.external_id AS wa_id
    FROM whatsapp_sent_parts p
    JOIN messages m ON m.app_id = p.app_id AND m.conversation_id = p.conversation_id
      AND m.id = p.message_id
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    LEFT JOIN client_identities i ON i.app_id = c.app_id AND i.client_id = c.client_id
      AND i.channel = 'whatsapp'
    WHERE p.app_id = ${appId} AND p.wamid = ANY (${wamids}::text[])`;
  return rows.map((row) => ({
    wamid: row.wamid,
    messageId: row.message_id,
    chatId: row.chat_id,
    messageType: row.message_type,
    payload: row.payload,
    chatOpen: row.status === "open",
    waId: row.wa_id,
  }));
}
