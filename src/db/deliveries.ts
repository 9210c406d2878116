/**
 * Queries of webhook deliveries: the `webhook` rows of the outbox and their attempts. A delivery
 * is claimed by setting a lease (`claimed_until`) in one `FOR UPDATE SKIP LOCKED` statement, so
 * that several deliverers (threads or instances) never take the same row, and a deliverer that
 * dies mid-attempt only delays its rows by the lease. Claims are fair between applications: the
 * applications are served in turn, each within the room its deliverer gives it, so that one
 * application's backlog or slow receiver never holds back the others.
 */
import type { Tx } from "./client.ts";
import { type MessageRow, toMessage } from "./messages.ts";
import type { Conversation, Message } from "../domain/conversation.ts";
import type { SlotRoom } from "../domain/fair_share.ts";
import {
  type ClaimRound,
  claimRound,
  roomOf,
  roundCtes,
  roundOf,
  walkEndCte,
} from "./application_round.ts";

/** What an attempt needs to know, read when the delivery is claimed. */
export interface DeliveryContext {
  /** The application's configuration now; null when it has none. */
  webhook: { url: string; events: string[]; enabled: boolean; secretSealed: string } | null;
  conversation: Conversation | null;
  message: Message | null;
}

/** A claimed delivery and its context. */
export interface ClaimedDelivery {
  appId: number;
  id: number;
  topic: string;
  /** Attempts made before this one. */
  attempts: number;
  createdAt: string;
  /** The lease of this claim; recording the attempt requires it still to be in place. */
  claimedUntil: string;
  /** Its application's place in the claim's round (1 for the first application visited). */
  turn: number;
  context: DeliveryContext;
}

interface ClaimedRow {
  app_id: number;
  id: number;
  topic: string;
  attempts: number;
  created_at: string;
  claimed_until: string;
  turn: number;
  url: string | null;
  events: string[] | null;
  enabled: boolean | null;
  secret_encrypted: string | null;
  snapshot: {
    conversation: Conversation | null;
    message: MessageRow | null;
    changed?: Partial<MessageRow> | null;
  };
}

/** Options of {@linkcode claimDeliveryRound}. */
export interface ClaimOptions {
  limit: number;
  leaseSeconds: number;
  /** How many each application may be given; by default every one may be given `limit`. */
  room?: SlotRoom<number>;
  /** The round starts with the application after this one (0: the lowest). */
  after?: number;
}

/** {@linkcode claimDeliveryRound}'s rows alone. */
export async function claimDueDeliveries(
  sql: Tx,
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  return (await claimDeliveryRound(sql, options)).rows;
}

/**
 * Claims up to `limit` due deliveries for `leaseSeconds`, each with the configuration in force
 * now and its conversation and message as its first claim found them (that claim keeps them in
 * `outbox.snapshot`, so that every attempt announces the same), what the event itself carries laid
 * over them (the message's `changed` fields: the status of a receipt, the text of an edit; the
 * `conversation`'s status and activity time as of the event) — one statement for the whole
 * claim, since per-delivery queries cost the database more than the deliveries themselves.
 *
 * Fair between applications (`application_round.ts`): the applications with deliveries pending
 * are taken in turn, starting after `after` and wrapping around, each one's due deliveries (first
 * attempts, retries and expired leases alike) oldest first and at most its room.
 */
export async function claimDeliveryRound(
  sql: Tx,
  options: ClaimOptions,
): Promise<ClaimRound<ClaimedDelivery>> {
  const { limit, leaseSeconds, after = 0 } = options;
  const room = options.room ?? { roomOfBusy: new Map(), roomOfIdle: limit };
  const pending = sql`o.kind = 'webhook' AND o.state = 'pending'`;
  const rows = await sql<(ClaimedRow & { walked_to: number | null })[]>`
    WITH RECURSIVE ${roundCtes(sql, { pending, after, room })}, due AS (
      SELECT d.app_id, d.id, d.payload, d.kept, walk.turn
      FROM walk CROSS JOIN LATERAL (
        SELECT o.app_id, o.id, o.payload, o.snapshot IS NOT NULL AS kept FROM outbox o
        WHERE ${pending} AND o.app_id = walk.app_id
          -- A stable bound, so that it ends the index scan: under clock_timestamp(), a filter,
          -- every claim read all the retries scheduled for later.
          AND o.run_at <= statement_timestamp()
          -- The lease is not indexed, so that a claim's update can be HOT: an application's
          -- deliveries in flight are read past here.
          AND (o.claimed_until IS NULL OR o.claimed_until < clock_timestamp())
        ORDER BY o.run_at
        LIMIT ${roomOf(sql, room, limit)}
        FOR UPDATE SKIP LOCKED
      ) d
      LIMIT ${limit}
    ), taken AS (
      -- What a first claim announces, kept with the claim (committed before any attempt).
      SELECT due.app_id, due.id, due.turn, CASE WHEN NOT due.kept THEN json_build_object(
        'conversation', CASE WHEN conv.id IS NOT NULL THEN json_build_object(
          -- Its status and activity as of the event where the event knows them (a chat.started
          -- claimed after the chat closed still says open), else as of now.
          'id', conv.id, 'client_id', conv.client_id,
          'status', coalesce(due.payload #>> '{conversation,status}', conv.status),
          'channel', conv.channel,
          'last_message_at', to_char(coalesce(
            (due.payload #>> '{conversation,last_message_at}')::timestamptz, conv.last_message_at
          ) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
          'created_at',
          to_char(conv.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        ) END,
        'message', CASE WHEN m.id IS NOT NULL THEN json_build_object(
          'id', m.id, 'conversation_id', m.conversation_id, 'sender_type', m.sender_type,
          'sender_name', m.sender_name, 'message_type', m.message_type, 'content', m.content,
          'payload', m.payload, 'internal', m.internal, 'status', m.status,
          'failure_code', m.failure_code, 'failure_title', m.failure_title,
          'referral', m.referral,
          'created_at', to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        ) END,
        -- What the event announces of the message as of its change (a status, an edit).
        'changed', due.payload -> 'changed'
      ) END AS snapshot
      FROM due
      LEFT JOIN conversations conv ON NOT due.kept
        AND conv.app_id = due.app_id AND conv.id = (due.payload ->> 'conversation_id')::bigint
      -- The conversation too, so that both indexes on messages are exact: on (app_id, id) alone
      -- the planner may pick (app_id, conversation_id, id) and skip-scan every conversation.
      LEFT JOIN messages m ON NOT due.kept
        AND m.app_id = due.app_id AND m.conversation_id = (due.payload ->> 'conversation_id')::bigint
          AND m.id = (due.payload ->> 'message_id')::bigint
    ), claimed AS (
      UPDATE outbox o
      SET claimed_until = clock_timestamp() + make_interval(secs => ${leaseSeconds}),
        snapshot = coalesce(o.snapshot, t.snapshot)
      FROM taken t
      WHERE o.app_id = t.app_id AND o.id = t.id
      RETURNING o.app_id, o.id, o.topic, o.attempts, o.created_at, o.claimed_until, o.snapshot,
        t.turn
    ), ${walkEndCte(sql, limit)}
    SELECT round.walked_to, c.app_id, c.id, c.topic, c.attempts, c.created_at, c.claimed_until,
      c.snapshot, c.turn, w.url, w.events, w.enabled, w.secret_encrypted
    FROM ${claimRound(sql)}
    LEFT JOIN webhooks w ON w.app_id = c.app_id`;
  return roundOf(rows, (row) => ({
    appId: row.app_id,
    id: row.id,
    topic: row.topic,
    attempts: row.attempts,
    createdAt: row.created_at,
    claimedUntil: row.claimed_until,
    turn: row.turn,
    context: {
      webhook: row.url === null ? null : {
        url: row.url,
        events: row.events ?? [],
        enabled: row.enabled ?? false,
        secretSealed: row.secret_encrypted ?? "",
      },
      conversation: row.snapshot.conversation,
      message: row.snapshot.message
        ? toMessage({ ...row.snapshot.message, ...row.snapshot.changed })
        : null,
    },
  }));
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

/** One attempt to record and the state that follows it. */
export interface RecordedAttempt {
  delivery: { appId: number; id: number; claimedUntil: string };
  attempt: AttemptRecord;
  outcome: AttemptOutcome;
}

/**
 * Records attempts and moves their deliveries to their next states, all in one statement (a
 * busy deliverer finishes hundreds of attempts a second; one statement each would cost the
 * database more than the deliveries). Deliveries must be distinct. Idempotent: recording the same
 * claims' attempts again changes nothing, so a record whose answer was lost can be tried again.
 */
export async function recordAttempts(sql: Tx, records: RecordedAttempt[]): Promise<void> {
  const column = <T>(pick: (record: RecordedAttempt) => T) => records.map(pick);
  await sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${column((r) => r.delivery.appId)}::bigint[], ${column((r) => r.delivery.id)}::bigint[],
        ${column((r) => r.attempt.statusCode)}::int[], ${column((r) => r.attempt.latencyMs)}::int[],
        ${column((r) => r.attempt.error)}::text[],
        ${column((r) => r.attempt.responseExcerpt)}::text[],
        ${column((r) => r.outcome.state)}::text[],
        ${column((r) => r.outcome.state === "pending" ? r.outcome.retryInMs / 1000 : 0)}::float8[],
        ${column((r) => r.delivery.claimedUntil)}::timestamptz[]
      ) AS input (app_id, id, status_code, latency_ms, error, excerpt, state, retry_in, claim)
    ), attempts AS (
      INSERT INTO webhook_attempts (app_id, outbox_id, attempted_at, status_code, latency_ms,
        error, response_excerpt, claimed_until)
      -- Recorded once it ended: it was attempted its latency ago.
      SELECT app_id, id, clock_timestamp() - make_interval(secs => latency_ms / 1000.0),
        status_code, latency_ms, error, excerpt, claim
      FROM input
      -- A second try of a record that committed (its answer was lost) adds nothing, even one
      -- that runs while the first is still in flight (it waits for it on the unique index).
      ON CONFLICT (app_id, outbox_id, claimed_until) WHERE claimed_until IS NOT NULL DO NOTHING
    )
    UPDATE outbox o SET attempts = o.attempts + 1, last_error = i.error, claimed_until = NULL,
      -- A retry asked during the attempt makes anything but a success due again at once.
      state = CASE WHEN o.retry_requested AND i.state <> 'succeeded' THEN 'pending' ELSE i.state END,
      run_at = clock_timestamp() + CASE WHEN o.retry_requested AND i.state <> 'succeeded'
        THEN interval '0' ELSE make_interval(secs => i.retry_in) END,
      retry_requested = false
    FROM input i
    -- Only while this claim holds: a manual retry or an expired lease handed the delivery on.
    WHERE o.app_id = i.app_id AND o.id = i.id AND o.claimed_until = i.claim`;
}

/** Deletes attempts older than 14 days and finished deliveries whose attempts are all gone. */
export async function deleteOldAttempts(sql: Tx): Promise<number> {
  // statement_timestamp(), stable, so that the BRIN index on attempted_at serves the delete
  // (under clock_timestamp() every sweep read the whole table).
  const result = await sql`
    WITH gone AS (
      DELETE FROM webhook_attempts WHERE attempted_at < statement_timestamp() - interval '14 days'
    )
    DELETE FROM outbox o
    WHERE kind = 'webhook' AND state <> 'pending'
      AND created_at < statement_timestamp() - interval '14 days'
      AND NOT EXISTS (
        SELECT 1 FROM webhook_attempts a
        WHERE a.app_id = o.app_id AND a.outbox_id = o.id
          AND a.attempted_at >= statement_timestamp() - interval '14 days'
      )`;
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
): Promise<DeliveryListing[]> {
  const statusFilter = options.status ? sql`AND o.state = ${options.status}` : sql``;
  return await sql<DeliveryListing[]>`
    SELECT o.id, o.topic AS type, o.state AS status, o.created_at,
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
 * false when the application has no such delivery. With an attempt in flight, the new one is
 * due as soon as that attempt has recorded anything but a success.
 */
export async function retryDelivery(sql: Tx, appId: number, id: number): Promise<boolean> {
  const rows = await sql`
    WITH target AS (
      SELECT id, claimed_until > clock_timestamp() AS busy FROM outbox
      WHERE app_id = ${appId} AND id = ${id} AND kind = 'webhook'
    ), retried AS (
      -- An attempt in flight is left to record its own outcome; the request waits for it.
      UPDATE outbox o SET
        state = CASE WHEN t.busy THEN o.state ELSE 'pending' END,
        run_at = CASE WHEN t.busy THEN o.run_at ELSE clock_timestamp() END,
        claimed_until = CASE WHEN t.busy THEN o.claimed_until END,
        retry_requested = t.busy IS TRUE
      FROM target t
      WHERE o.app_id = ${appId} AND o.id = t.id
    )
    SELECT id FROM target`;
  return rows.length === 1;
}
