/**
 * Queries of webhook deliveries: the `webhook` rows of the outbox and their attempts. A delivery
 * is claimed by moving its `run_at` past a lease in one `FOR UPDATE SKIP LOCKED` statement, so
 * that several deliverers (threads or instances) never take the same row, and a deliverer that
 * dies mid-attempt only delays its rows by the lease.
 */
import type { Tx } from "./client.ts";
import { type MessageRow, toMessage } from "./messages.ts";
import type { Conversation, Message } from "../domain/conversation.ts";

/** A claimed delivery. */
export interface ClaimedDelivery {
  appId: number;
  id: number;
  topic: string;
  payload: { conversation_id: number; message_id?: number };
  /** Attempts made before this one. */
  attempts: number;
  createdAt: string;
}

/** Claims up to `limit` due deliveries for `leaseSeconds`. */
export async function claimDueDeliveries(
  sql: Tx,
  options: { limit: number; leaseSeconds: number },
): Promise<ClaimedDelivery[]> {
  const rows = await sql<
    {
      app_id: number;
      id: number;
      topic: string;
      payload: ClaimedDelivery["payload"];
      attempts: number;
      created_at: string;
    }[]
  >`
    WITH due AS (
      SELECT app_id, id FROM outbox
      WHERE kind = 'webhook' AND state = 'pending' AND run_at <= clock_timestamp()
      ORDER BY run_at
      LIMIT ${options.limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE outbox o SET run_at = clock_timestamp() + make_interval(secs => ${options.leaseSeconds})
    FROM due WHERE o.app_id = due.app_id AND o.id = due.id
    RETURNING o.app_id, o.id, o.topic, o.payload, o.attempts, o.created_at`;
  return rows.map((row) => ({
    appId: row.app_id,
    id: row.id,
    topic: row.topic,
    payload: row.payload,
    attempts: row.attempts,
    createdAt: row.created_at,
  }));
}

/** What an attempt needs to know at the moment it runs. */
export interface DeliveryContext {
  /** The application's configuration now; null when it has none. */
  webhook: { url: string; events: string[]; enabled: boolean; secretSealed: string } | null;
  conversation: Conversation | null;
  message: Message | null;
}

/** Loads the current webhook configuration and the delivery's conversation and message. */
export async function loadDeliveryContext(
  sql: Tx,
  delivery: ClaimedDelivery,
): Promise<DeliveryContext> {
  const { appId, payload } = delivery;
  const [webhooks, conversations, messages] = await Promise.all([
    sql<{ url: string; events: string[]; enabled: boolean; secret_encrypted: string }[]>`
      SELECT url, events, enabled, secret_encrypted FROM webhooks WHERE app_id = ${appId}`,
    sql<Conversation[]>`
      SELECT id, client_id, status, channel, last_message_at, created_at
      FROM conversations WHERE app_id = ${appId} AND id = ${payload.conversation_id}`,
    payload.message_id === undefined ? Promise.resolve([]) : sql<MessageRow[]>`
      SELECT id, conversation_id, sender_type, sender_name, message_type, content, payload,
        internal, status, created_at
      FROM messages WHERE app_id = ${appId} AND id = ${payload.message_id}`,
  ]);
  const webhook = webhooks[0];
  return {
    webhook: webhook
      ? {
        url: webhook.url,
        events: webhook.events,
        enabled: webhook.enabled,
        secretSealed: webhook.secret_encrypted,
      }
      : null,
    conversation: conversations[0] ?? null,
    message: messages[0] ? toMessage(messages[0]) : null,
  };
}

/** One attempt as recorded in the delivery log. */
export interface AttemptRecord {
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  responseExcerpt: string | null;
}

/** What follows an attempt. */
export type AttemptOutcome =
  | { state: "succeeded" }
  | { state: "failed" }
  | { state: "pending"; retryInMs: number };

/** Records an attempt and moves the delivery to its next state, in one statement. */
export async function recordAttempt(
  sql: Tx,
  delivery: { appId: number; id: number },
  attempt: AttemptRecord,
  outcome: AttemptOutcome,
): Promise<void> {
  const retryInMs = outcome.state === "pending" ? outcome.retryInMs : 0;
  await sql`
    WITH attempt AS (
      INSERT INTO webhook_attempts
        (app_id, outbox_id, status_code, latency_ms, error, response_excerpt)
      VALUES (${delivery.appId}, ${delivery.id}, ${attempt.statusCode}, ${attempt.latencyMs},
        ${attempt.error}, ${attempt.responseExcerpt})
    )
    UPDATE outbox SET state = ${outcome.state}, attempts = attempts + 1,
      last_error = ${attempt.error},
      run_at = clock_timestamp() + make_interval(secs => ${retryInMs / 1000})
    WHERE app_id = ${delivery.appId} AND id = ${delivery.id}`;
}

/** Deletes attempts older than 14 days and finished deliveries whose attempts are all gone. */
export async function deleteOldAttempts(sql: Tx): Promise<number> {
  const result = await sql`
    WITH gone AS (
      DELETE FROM webhook_attempts WHERE attempted_at < clock_timestamp() - interval '14 days'
    )
    DELETE FROM outbox
    WHERE kind = 'webhook' AND state <> 'pending'
      AND created_at < clock_timestamp() - interval '14 days'`;
  return result.count;
}

/** A delivery as the delivery log shows it. */
export interface DeliveryListing {
  id: number;
  type: string;
  status: "pending" | "succeeded" | "failed";
  created_at: string;
  /** When the next attempt runs; null once the delivery is finished. */
  next_attempt_at: string | null;
  attempts: {
    attempted_at: string;
    status_code: number | null;
    latency_ms: number;
    error: string | null;
    response_excerpt: string | null;
  }[];
}

/** An application's deliveries, newest first, each with its attempts (oldest first). */
export async function listDeliveries(
  sql: Tx,
  appId: number,
  options: { status?: DeliveryListing["status"]; limit: number },
): Promise<(DeliveryListing & { app_id: number })[]> {
  const statusFilter = options.status ? sql`AND o.state = ${options.status}` : sql``;
  return await sql<(DeliveryListing & { app_id: number })[]>`
    SELECT o.app_id, o.id, o.topic AS type, o.state AS status, o.created_at,
      CASE WHEN o.state = 'pending' THEN o.run_at END AS next_attempt_at,
      coalesce((
        SELECT json_agg(json_build_object(
          'attempted_at',
          to_char(a.attempted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
          'status_code', a.status_code, 'latency_ms', a.latency_ms, 'error', a.error,
          'response_excerpt', a.response_excerpt) ORDER BY a.id)
        FROM webhook_attempts a WHERE a.app_id = o.app_id AND a.outbox_id = o.id
      ), '[]'::json) AS attempts
    FROM outbox o
    WHERE o.app_id = ${appId} AND o.kind = 'webhook' ${statusFilter}
    ORDER BY o.id DESC
    LIMIT ${options.limit}`;
}

/**
 * Schedules an immediate new attempt of a delivery of the application, whatever its state;
 * false when the application has no such delivery.
 */
export async function retryDelivery(sql: Tx, appId: number, id: number): Promise<boolean> {
  const rows = await sql`
    UPDATE outbox SET state = 'pending', run_at = clock_timestamp()
    WHERE app_id = ${appId} AND id = ${id} AND kind = 'webhook'
    RETURNING id`;
  return rows.length === 1;
}
