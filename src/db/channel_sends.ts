/**
 * Queries of channel sends: the outbox rows that carry Parley's messages out to a channel
 * (`kind = 'whatsapp'` today). A send is claimed like a webhook delivery (a lease, `FOR UPDATE
 * SKIP LOCKED`), but only when no earlier send to its customer is still pending, so that a
 * customer's messages leave in order, whichever of their conversations they are in, even with
 * several senders. Parts already sent are
 * remembered, so a retry never sends them twice.
 */
import type { Tx } from "./client.ts";
import { type ChannelClaimOptions, claimedInSendOrder } from "./channel_claims.ts";
import { type ClaimRound, claimRound, roundOf } from "./application_round.ts";
import type { MessageType } from "../domain/message_kinds.ts";
import type { WhatsAppRecipient } from "../domain/whatsapp_recipient.ts";
import { queueNotDelivered } from "./slack_mirror.ts";
import { replyWindowOpen } from "./reply_window.ts";

/** A claimed send and what it needs. */
export interface ClaimedSend {
  appId: number;
  id: number;
  attempts: number;
  /** The claim's token (see `channel_claims.ts`). */
  claimedAt: string;
  /** Its application's place in the claim's round (1 for the first application visited). */
  turn: number;
  message: {
    id: number;
    chatId: number;
    messageType: MessageType;
    content: string;
    payload: unknown;
    /**
     * Deleted, or made an internal note, since it was queued (a Slack reply edited into `note:`
     * or deleted): it must not leave.
     */
    withdrawn: boolean;
  } | null;
  /**
   * The customer's newest WhatsApp id (phone number), else their newest business-scoped user id;
   * null when the conversation has neither.
   */
  recipient: WhatsAppRecipient | null;
  /** The application's channel now; null when it has none. */
  channel: { phoneNumberId: string; accessTokenSealed: string } | null;
  /** How many parts of the message were already sent by earlier attempts. */
  sentParts: number;
  /**
   * Whether the customer's 24-hour window is open at the claim (see `reply_window.ts`).
   */
  windowOpen: boolean;
}

interface ClaimedSendRow {
  app_id: number;
  id: number;
  attempts: number;
  claimed_at: string;
  turn: number;
  walked_to: number | null;
  message_id: number | null;
  chat_id: number | null;
  message_type: MessageType | null;
  content: string | null;
  payload: unknown;
  withdrawn: boolean | null;
  recipient: string | null;
  recipient_kind: string | null;
  phone_number_id: string | null;
  access_token_sealed: string | null;
  sent_parts: number;
  window_open: boolean;
}

/**
 * Claims up to `limit` due sends of `kind`, one per customer, the applications in turn (see
 * {@linkcode claimedInSendOrder}).
 */
export async function claimChannelSends(
  sql: Tx,
  options: ChannelClaimOptions & { kind: "whatsapp" },
): Promise<ClaimRound<ClaimedSend>> {
  const rows = await sql<ClaimedSendRow[]>`
    ${claimedInSendOrder(sql, options)}
    SELECT round.walked_to, c.app_id, c.id, c.attempts, c.claimed_at, c.turn,
      m.id AS message_id, m.conversation_id AS chat_id, m.message_type, m.content, m.payload,
      m.internal OR m.deleted_at IS NOT NULL AS withdrawn, i.external_id AS recipient,
      i.channel AS recipient_kind, w.phone_number_id, w.access_token_sealed,
      (SELECT count(*) FROM whatsapp_sent_parts p
        WHERE p.app_id = c.app_id AND p.message_id = m.id)::int AS sent_parts,
      ${replyWindowOpen(sql, "conv", sql`clock_timestamp()`)} AS window_open
    FROM ${claimRound(sql)}
    LEFT JOIN messages m ON m.app_id = c.app_id
      AND m.conversation_id = (c.payload ->> 'conversation_id')::bigint
      AND m.id = (c.payload ->> 'message_id')::bigint
    LEFT JOIN conversations conv ON conv.app_id = m.app_id AND conv.id = m.conversation_id
    LEFT JOIN LATERAL (
      -- Meta recommends phone numbers where known; a number changed is the newest identity.
      SELECT channel, external_id FROM client_identities ci
      WHERE ci.app_id = conv.app_id AND ci.client_id = conv.client_id
        AND ci.channel IN ('whatsapp', 'whatsapp_user')
      ORDER BY ci.channel = 'whatsapp' DESC, ci.created_at DESC LIMIT 1
    ) i ON true
    LEFT JOIN whatsapp_channels w ON w.app_id = c.app_id`;
  return roundOf(rows, (row) => ({
    appId: row.app_id,
    id: row.id,
    attempts: row.attempts,
    claimedAt: row.claimed_at,
    turn: row.turn,
    message: row.message_id === null ? null : {
      id: row.message_id,
      chatId: row.chat_id!,
      messageType: row.message_type!,
      content: row.content!,
      payload: row.payload,
      withdrawn: row.withdrawn!,
    },
    recipient: row.recipient === null
      ? null
      : { kind: row.recipient_kind === "whatsapp" ? "phone" : "user", id: row.recipient },
    channel: row.phone_number_id === null ? null : {
      phoneNumberId: row.phone_number_id,
      accessTokenSealed: row.access_token_sealed!,
    },
    sentParts: row.sent_parts,
    windowOpen: row.window_open,
  }));
}

/**
 * Makes the pending channel sends of `messageIds` (just deleted or made notes) due now, so that
 * they are withdrawn at once rather than when their retry comes, holding their customer's later
 * sends back till then.
 */
export async function hastenWithdrawnSends(
  sql: Tx,
  appId: number,
  messageIds: number[],
): Promise<void> {
  if (messageIds.length === 0) return;
  await sql`
    UPDATE outbox o SET run_at = clock_timestamp()
    WHERE o.app_id = ${appId} AND o.kind = 'whatsapp' AND o.state = 'pending'
      AND o.claimed_at IS NULL AND o.run_at > clock_timestamp()
      AND (o.payload ->> 'message_id')::bigint = ANY (${messageIds}::bigint[])`;
}

/**
 * Remembers part `part` of a message as sent under `wamid` (the first part names the message).
 * A part Meta accepted without naming it (`wamid` null) is remembered as sent, under a stand-in
 * id no receipt carries, so that it is never sent again. Resolves to whether receipts for `wamid`
 * came before it and wait (`applyEarlyWhatsAppStatuses` applies them).
 */
export async function recordSentPart(
  sql: Tx,
  send: { appId: number; chatId: number; messageId: number },
  part: number,
  wamid: string | null,
): Promise<boolean> {
  const id = wamid ?? `unnamed:${send.messageId}:${part}`;
  const [row] = await sql<{ waiting: boolean }[]>`
    WITH part AS (
      INSERT INTO whatsapp_sent_parts (app_id, wamid, message_id, part, conversation_id)
      VALUES (${send.appId}, ${id}, ${send.messageId}, ${part}, ${send.chatId})
      ON CONFLICT DO NOTHING
    ), named AS (
      UPDATE messages SET external_id = ${wamid}
      WHERE app_id = ${send.appId} AND conversation_id = ${send.chatId}
        AND id = ${send.messageId} AND ${part}::int = 0 AND external_id IS NULL
        AND ${wamid}::text IS NOT NULL
    )
    -- The steps above run though nothing reads them: PostgreSQL runs every data-modifying step.
    SELECT EXISTS (
      SELECT FROM whatsapp_early_statuses WHERE app_id = ${send.appId} AND wamid = ${id}
    ) AS waiting`;
  return row.waiting;
}

/** How a send attempt ended. */
export type SendOutcome =
  | { state: "sent" }
  | { state: "retry"; retryInMs: number; error: string }
  | { state: "failed"; error: string; code: number | null }
  /**
   * The message was deleted or made a note before it (all of it) left: nothing more is sent.
   * `partSent`: an earlier attempt sent a part of it.
   */
  | { state: "withdrawn"; partSent: boolean };

/** The send's error when its message was withdrawn (see {@linkcode SendOutcome}). */
export const WITHDRAWN_ERROR =
  "withdrawn: the message was deleted or made an internal note before it was sent";

/**
 * Records a send attempt while its claim holds: sent (the message becomes `sent` unless a
 * receipt already moved it further), a retry later, failed for good (the message becomes
 * `failed` with the platform's code, and `message.failed` is queued for a subscribed webhook), or
 * withdrawn (the send ends; a message still `pending` has no delivery status any more, or is
 * `sent` when a part of it left).
 */
export async function recordSendOutcome(
  sql: Tx,
  send: {
    appId: number;
    id: number;
    /** The claim's token (see `channel_claims.ts`). */
    claimedAt: string;
    messageId: number | null;
    chatId: number | null;
  },
  outcome: SendOutcome,
): Promise<void> {
  const state = outcome.state === "sent"
    ? "succeeded"
    : outcome.state === "retry"
    ? "pending"
    : "failed";
  const retryIn = outcome.state === "retry" ? outcome.retryInMs / 1000 : 0;
  const error = outcome.state === "sent"
    ? null
    : outcome.state === "withdrawn"
    ? WITHDRAWN_ERROR
    : outcome.error;
  const withdrawn = outcome.state === "withdrawn";
  // A part that left has its receipts to come: it keeps a status.
  const withdrawnStatus = outcome.state === "withdrawn" && outcome.partSent ? "sent" : null;
  await sql`
    WITH finished AS (
      UPDATE outbox o SET state = ${state}, attempts = o.attempts + 1, last_error = ${error},
        run_at = clock_timestamp() + make_interval(secs => ${retryIn}), claimed_until = NULL,
        claimed_at = NULL
      WHERE o.app_id = ${send.appId} AND o.id = ${send.id}
        AND o.claimed_at = ${send.claimedAt}::timestamptz
      RETURNING o.id
    ), sent AS (
      UPDATE messages m SET status = 'sent', updated_at = clock_timestamp()
      FROM finished
      WHERE ${state} = 'succeeded' AND m.app_id = ${send.appId}
        AND m.conversation_id = ${send.chatId} AND m.id = ${send.messageId}
        AND (m.status IS NULL OR m.status = 'pending')
    ), withdrawn AS (
      UPDATE messages m SET status = ${withdrawnStatus}, updated_at = clock_timestamp()
      FROM finished
      WHERE ${withdrawn} AND m.app_id = ${send.appId}
        AND m.conversation_id = ${send.chatId} AND m.id = ${send.messageId}
        AND m.status = 'pending'
    ), failed AS (
      UPDATE messages m SET status = 'failed', updated_at = clock_timestamp(),
        failure_code = ${outcome.state === "failed" ? outcome.code : null}::int,
        failure_title = ${outcome.state === "failed" ? outcome.error : null}::text
      FROM finished
      WHERE ${state} = 'failed' AND NOT ${withdrawn} AND m.app_id = ${send.appId}
        AND m.conversation_id = ${send.chatId} AND m.id = ${send.messageId}
        AND m.status IS DISTINCT FROM 'failed'
      RETURNING m.id, m.conversation_id
    ), mirror AS (
      ${queueNotDelivered(sql, send.appId, "failed")}
    )
    INSERT INTO outbox (app_id, kind, topic, payload)
    SELECT ${send.appId}, 'webhook', 'message.failed',
      jsonb_build_object('conversation_id', failed.conversation_id, 'message_id', failed.id)
    FROM failed JOIN webhooks w ON w.app_id = ${send.appId} AND w.enabled
      AND 'message.failed' = ANY (w.events)`;
}
