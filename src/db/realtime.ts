/**
 * The reads of the realtime hub: what a change notice or a reconnect means for the visitor
 * sockets attached to this instance. Every query leaves out internal notes (and, but for the
 * edits read to announce a deletion, deleted messages), because these rows go straight to
 * visitors.
 */
import type { Sql, Tx } from "./client.ts";
import { type MessageRow, toMessage } from "./messages.ts";
import type { Conversation, Message } from "../domain/conversation.ts";

/** A client of an application, as the hub keys its sockets. */
export interface WatchedClient {
  appId: number;
  clientId: number;
}

/** A message bound for the sockets of one client. */
export interface ClientMessage {
  appId: number;
  clientId: number;
  message: Message;
}

/** A conversation bound for the sockets of its client. */
export interface ClientConversation {
  appId: number;
  chat: Conversation;
}

interface ClientMessageRow extends MessageRow {
  app_id: number;
  client_id: number;
}

/**
 * The visible messages of applications `appIds` with an id in `range` (inclusive), each with
 * its conversation's client, in id order. It reads every client's messages: a notice's range
 * holds one transaction's messages, and sending the watched clients along (thousands of them
 * with many sockets open) cost PostgreSQL far more than the rows the caller skips.
 */
export async function listMessagesInRange(
  sql: Tx,
  appIds: number[],
  range: [number, number],
): Promise<ClientMessage[]> {
  if (appIds.length === 0) return [];
  const rows = await sql<ClientMessageRow[]>`
    SELECT m.app_id, c.client_id, m.id, m.conversation_id, m.sender_type, m.sender_name,
      m.message_type, m.content, m.payload, m.internal, m.status, m.created_at
    FROM messages m
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    WHERE m.app_id = ANY (${distinct(appIds)}::bigint[])
      AND m.id BETWEEN ${range[0]} AND ${range[1]}
      AND NOT m.internal AND m.deleted_at IS NULL
    ORDER BY m.id`;
  return rows.map(toClientMessage);
}

/**
 * The messages named by `[appId, chatId, messageId, gone]` (edited ones), with their
 * conversation's client; deleted ones come back with `deleted: true`, and so do internal ones
 * named as gone (a reply made internal); other internal notes are left out.
 */
export async function listMessagesByIds(
  sql: Tx,
  keys: [number, number, number, 0 | 1][],
): Promise<(ClientMessage & { deleted: boolean })[]> {
  if (keys.length === 0) return [];
  const rows = await sql<(ClientMessageRow & { deleted: boolean })[]>`
    SELECT m.app_id, c.client_id, m.id, m.conversation_id, m.sender_type, m.sender_name,
      m.message_type, m.content, m.payload, m.internal, m.status, m.created_at,
      m.deleted_at IS NOT NULL OR m.internal AS deleted
    FROM unnest(${keys.map((k) => k[0])}::bigint[], ${keys.map((k) => k[1])}::bigint[],
      ${keys.map((k) => k[2])}::bigint[], ${keys.map((k) => k[3])}::int[])
      AS k (app_id, chat_id, id, gone)
    JOIN messages m ON m.app_id = k.app_id AND m.conversation_id = k.chat_id AND m.id = k.id
    JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
    WHERE NOT m.internal OR k.gone = 1
    ORDER BY m.id`;
  return rows.map((row) => ({ ...toClientMessage(row), deleted: row.deleted }));
}

/** The conversations named by `[appId, chatId]` pairs; unknown pairs are left out. */
export async function listConversationsByIds(
  sql: Tx,
  chats: [number, number][],
): Promise<ClientConversation[]> {
  if (chats.length === 0) return [];
  const appIds = chats.map(([appId]) => appId);
  const chatIds = chats.map(([, chatId]) => chatId);
  const rows = await sql<(Conversation & { app_id: number })[]>`
    SELECT c.app_id, c.id, c.client_id, c.status, c.channel, c.last_message_at, c.created_at
    FROM conversations c
    JOIN unnest(${appIds}::bigint[], ${chatIds}::bigint[]) AS k (app_id, id)
      ON k.app_id = c.app_id AND k.id = c.id
    ORDER BY c.app_id, c.id`;
  return rows.map(({ app_id, ...chat }) => ({ appId: app_id, chat }));
}

/**
 * The messages of the `clients`' conversations created at or after `since`, in id order:
 * what a socket may have missed while the LISTEN connection was down.
 */
export async function listClientMessagesSince(
  sql: Tx,
  clients: WatchedClient[],
  since: Date,
): Promise<ClientMessage[]> {
  if (clients.length === 0) return [];
  const { appIds, clientIds } = columns(clients);
  // Driven from the watched clients' conversations, so that both joins use indexes
  // (messages have no index on created_at, and a visitor's conversations are short).
  const rows = await sql<ClientMessageRow[]>`
    SELECT m.app_id, c.client_id, m.id, m.conversation_id, m.sender_type, m.sender_name,
      m.message_type, m.content, m.payload, m.internal, m.status, m.created_at
    FROM unnest(${appIds}::bigint[], ${clientIds}::bigint[]) AS w (app_id, client_id)
    JOIN conversations c ON c.app_id = w.app_id AND c.client_id = w.client_id
      -- Every message a visitor sees moves its conversation's activity to its own time: the
      -- conversations with none since are not read (each one's history was, 58 ms for 2,000).
      AND c.last_message_at >= ${since.toISOString()}::timestamptz
    JOIN messages m ON m.app_id = c.app_id AND m.conversation_id = c.id
    WHERE m.app_id = ANY (${distinct(appIds)}::bigint[])
      AND m.created_at >= ${since.toISOString()}::timestamptz
      AND NOT m.internal AND m.deleted_at IS NULL
    ORDER BY m.id`;
  return rows.map(toClientMessage);
}

/** What commits changed for the visitor sockets: a notice's changes, or a replay's. */
export interface ClientChanges {
  /** Conversations whose state changed (or may have), by application and id. */
  conversations: ClientConversation[];
  /** Messages created, in id order. */
  messages: ClientMessage[];
  /** Messages edited, given a status or deleted, in id order. */
  edited: (ClientMessage & { deleted: boolean })[];
}

/**
 * What the `clients` may have missed while the LISTEN connection was down: the messages of theirs
 * created at or after `since` ({@linkcode listClientMessagesSince}), their conversations whose
 * state may have changed since, and their visible messages edited, given a status or deleted
 * since (a reply made an internal note comes back deleted). A conversation written to counts (a
 * reopen moves only its activity time), so some of these changed nothing a socket has not seen.
 * The three reads see one snapshot (a read-only repeatable-read transaction): read apart, a
 * conversation could be seen closed without the messages committed before its close.
 */
export async function listClientChangesSince(
  sql: Sql,
  clients: WatchedClient[],
  since: Date,
): Promise<ClientChanges> {
  if (clients.length === 0) return { conversations: [], messages: [], edited: [] };
  return await sql.begin(
    "isolation level repeatable read read only",
    (tx) => readClientChangesSince(tx, clients, since),
  );
}

/**
 * The reads of {@linkcode listClientChangesSince} on `sql` as it is: one snapshot only when `sql`
 * is a repeatable-read transaction (or a single connection nothing else writes through).
 */
export async function readClientChangesSince(
  sql: Tx,
  clients: WatchedClient[],
  since: Date,
): Promise<ClientChanges> {
  const { appIds, clientIds } = columns(clients);
  const at = since.toISOString();
  const [messages, conversations, edited] = await Promise.all([
    listClientMessagesSince(sql, clients, since),
    sql<(Conversation & { app_id: number })[]>`
      SELECT c.app_id, c.id, c.client_id, c.status, c.channel, c.last_message_at, c.created_at
      FROM unnest(${appIds}::bigint[], ${clientIds}::bigint[]) AS w (app_id, client_id)
      -- A probe of each watched client's conversations: joined, a custom plan read the whole
      -- table (48 ms at 200,000 conversations for 2,000 clients).
      CROSS JOIN LATERAL (
        SELECT * FROM conversations c
        WHERE c.app_id = w.app_id AND c.client_id = w.client_id
          AND greatest(c.created_at, c.last_message_at, c.closed_at) >= ${at}::timestamptz
        OFFSET 0
      ) c
      ORDER BY c.app_id, c.id`,
    sql<(ClientMessageRow & { deleted: boolean })[]>`
      SELECT m.app_id, c.client_id, m.id, m.conversation_id, m.sender_type, m.sender_name,
        m.message_type, m.content, m.payload, m.internal, m.status, m.created_at,
        m.deleted_at IS NOT NULL OR m.internal AS deleted
      FROM unnest(${appIds}::bigint[], ${clientIds}::bigint[]) AS w (app_id, client_id)
      JOIN conversations c ON c.app_id = w.app_id AND c.client_id = w.client_id
      JOIN messages m ON m.app_id = c.app_id AND m.conversation_id = c.id
      WHERE m.app_id = ANY (${distinct(appIds)}::bigint[])
        AND greatest(m.updated_at, m.deleted_at) >= ${at}::timestamptz
        -- A note was never the visitor's, unless it was a reply they saw, made a note since.
        AND (NOT m.internal OR m.hidden_at IS NOT NULL)
      ORDER BY m.id`,
  ]);
  return {
    conversations: conversations.map(({ app_id, ...chat }) => ({ appId: app_id, chat })),
    messages,
    edited: edited.map((row) => ({ ...toClientMessage(row), deleted: row.deleted })),
  };
}

function toClientMessage(row: ClientMessageRow): ClientMessage {
  return { appId: row.app_id, clientId: row.client_id, message: toMessage(row) };
}

function columns(clients: WatchedClient[]): { appIds: number[]; clientIds: number[] } {
  return {
    appIds: clients.map((client) => client.appId),
    clientIds: clients.map((client) => client.clientId),
  };
}

function distinct(ids: number[]): number[] {
  return [...new Set(ids)];
}
