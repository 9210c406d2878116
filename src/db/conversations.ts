/** Queries of the `conversations` table. */
import type { Tx } from "./client.ts";
import type { Conversation } from "../domain/conversation.ts";

/** The columns of a {@linkcode Conversation}, in its field order. */
const CONVERSATION_COLUMNS = [
  "id",
  "client_id",
  "status",
  "channel",
  "last_message_at",
  "created_at",
];

/** A conversation of application `appId`, or null when it has none with that id. */
export async function findConversation(
  sql: Tx,
  appId: number,
  id: number,
): Promise<Conversation | null> {
  const [row] = await sql<Conversation[]>`
    SELECT ${sql(CONVERSATION_COLUMNS)}
    FROM conversations WHERE app_id = ${appId} AND id = ${id}`;
  return row ?? null;
}

/** Result of {@linkcode closeConversation}. */
export interface ClosedConversation {
  conversation: Conversation;
  /** False when it was already closed (nothing changed, nothing announced). */
  changed: boolean;
  /** Webhook events queued (`chat.ended` when subscribed). */
  queuedEvents: number;
}

/**
 * Closes a conversation and queues `chat.ended` for a subscribed webhook, in one statement.
 * Buttons waiting for a click stop waiting (a Flow stops). Closing a closed conversation
 * changes nothing. Null when the application has no such id.
 */
export async function closeConversation(
  sql: Tx,
  appId: number,
  id: number,
): Promise<ClosedConversation | null> {
  const [row] = await sql<(Conversation & { changed: boolean; queued: number })[]>`
    WITH target AS (
      SELECT id, status FROM conversations WHERE app_id = ${appId} AND id = ${id} FOR UPDATE
    ), closed AS (
      UPDATE conversations c SET status = 'closed', closed_at = clock_timestamp(),
        action_message_id = NULL, flow_node = NULL, reply_action_message_id = NULL
      FROM target t
      WHERE c.app_id = ${appId} AND c.id = t.id AND t.status = 'open'
      RETURNING c.id, c.client_id, c.status, c.channel, c.last_message_at, c.created_at
    ), event AS (
      INSERT INTO outbox (app_id, kind, topic, payload)
      SELECT ${appId}, 'webhook', 'chat.ended', jsonb_build_object('conversation_id', closed.id,
        'conversation', jsonb_build_object('status', 'closed',
          'last_message_at', closed.last_message_at))
      FROM closed JOIN webhooks w ON w.app_id = ${appId} AND w.enabled
        AND 'chat.ended' = ANY (w.events)
      RETURNING 1
    )
    SELECT *, true AS changed, (SELECT count(*) FROM event)::int AS queued FROM closed
    UNION ALL
    SELECT c.id, c.client_id, c.status, c.channel, c.last_message_at, c.created_at, false, 0
    FROM conversations c JOIN target t ON c.app_id = ${appId} AND c.id = t.id
    WHERE t.status <> 'open'`;
  if (!row) return null;
  const { changed, queued, ...conversation } = row;
  return { conversation, changed, queuedEvents: queued };
}

/** The conversation `id` when it belongs to client `clientId` of application `appId`. */
export async function findClientConversation(
  sql: Tx,
  appId: number,
  clientId: number,
  id: number,
): Promise<Conversation | null> {
  const [row] = await sql<Conversation[]>`
    SELECT ${sql(CONVERSATION_COLUMNS)}
    FROM conversations WHERE app_id = ${appId} AND id = ${id} AND client_id = ${clientId}`;
  return row ?? null;
}

/** The newest conversation of a client, if it has any. */
export async function findLatestClientConversation(
  sql: Tx,
  appId: number,
  clientId: number,
): Promise<Conversation | null> {
  const [row] = await sql<Conversation[]>`
    SELECT ${sql(CONVERSATION_COLUMNS)}
    FROM conversations WHERE app_id = ${appId} AND client_id = ${clientId}
    ORDER BY id DESC LIMIT 1`;
  return row ?? null;
}

/** Options of {@linkcode listConversations}. */
export interface ListConversationsOptions {
  /** Only conversations with this status. */
  status?: Conversation["status"];
  /** Most conversations returned. */
  limit: number;
  /** Only conversations after this one in the listing's order (a page's last row). */
  after?: { lastMessageAt: string; id: number };
}

/** An application's conversations, newest activity first, ties by id descending. */
export async function listConversations(
  sql: Tx,
  appId: number,
  options: ListConversationsOptions,
): Promise<Conversation[]> {
  const { status, limit, after } = options;
  const pageFilter = after
    ? sql`AND (last_message_at, id) < (${after.lastMessageAt}::timestamptz, ${after.id})`
    : sql``;
  // One range of conversations_by_status_activity per status; both statuses merge two ranges.
  const page = (pageStatus: Conversation["status"]) =>
    sql`
      SELECT ${sql(CONVERSATION_COLUMNS)}
      FROM conversations
      WHERE app_id = ${appId} AND status = ${pageStatus} ${pageFilter}
      ORDER BY last_message_at DESC, id DESC
      LIMIT ${limit}`;
  if (status) return await sql<Conversation[]>`${page(status)}`;
  return await sql<Conversation[]>`
    SELECT * FROM ((${page("open")}) UNION ALL (${page("closed")})) AS pages
    ORDER BY last_message_at DESC, id DESC
    LIMIT ${limit}`;
}
