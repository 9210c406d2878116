/**
 * Queries of the Slack mirror's sends: the `slack` outbox rows, claimed one per conversation at a
 * time (so a thread's replies keep their order) with everything a post needs — the message, its
 * conversation and visitor, the conversation's thread if it has one, and the installation — and
 * what a post leaves behind: the thread of a conversation, the `ts` of each mirrored message.
 */
import type { AdReferral } from "../domain/ad_referral.ts";
import type { Tx } from "./client.ts";
import { type ChannelClaimOptions, claimedInSendOrder } from "./channel_claims.ts";
import { type ClaimRound, claimRound, roundOf } from "./application_round.ts";
import type { MessageType } from "../domain/message_kinds.ts";

/** A message another one quotes: what its post shows of it, unless it was deleted. */
export type QuotedMessage =
  | { deleted: true }
  | {
    deleted: false;
    senderType: string;
    senderName: string | null;
    messageType: MessageType;
    content: string;
    payload: unknown;
  };

/** A claimed mirror send. */
export interface ClaimedMirror {
  appId: number;
  id: number;
  /** `message`: post a message in the thread; `chat`: show the conversation's new status. */
  topic: "message" | "chat";
  attempts: number;
  /** The claim's token (see `channel_claims.ts`). */
  claimedAt: string;
  /** Its application's place in the claim's round (1 for the first application visited). */
  turn: number;
  conversation: {
    id: number;
    status: "open" | "closed";
    channel: string;
    visitorName: string | null;
    visitorEmail: string | null;
  } | null;
  message: {
    id: number;
    senderType: string;
    senderName: string | null;
    messageType: MessageType;
    content: string;
    payload: unknown;
    internal: boolean;
    /** Why the message was not delivered, when it failed before its mirror was posted. */
    failure: string | null;
    /** How many of its Slack posts are already there (by earlier attempts, or typed there). */
    postedParts: number;
    /** The `ts` of its first post, once there is one. */
    firstTs: string | null;
    /**
     * The message of the conversation it replies to (a WhatsApp customer's swipe-to-reply), or
     * null when it replies to none; `deleted` when that message was deleted since.
     */
    replyTo: QuotedMessage | null;
    /** The ad a WhatsApp customer's message came from, if any. */
    referral: AdReferral | null;
  } | null;
  /** The conversation's thread, when it has one in the installation's workspace. */
  thread: { channelId: string; ts: string } | null;
  /**
   * When its root was attempted in the installation's channel without its ts being learnt, in
   * Unix seconds (first and last attempt); null when it never was.
   */
  rootAttempt: {
    firstAt: number;
    lastAt: number;
    /** The oldest ts a search has read back to since the last attempt; null before any. */
    searchedTo: string | null;
  } | null;
  installation: {
    teamId: string;
    channelId: string;
    /** The bot's id (`B…`), which its posts carry; null when Slack did not say. */
    botId: string | null;
    /** The bot's user id (`U…`). */
    botUserId: string;
    botTokenSealed: string;
    /** How long Slack still asks the workspace's calls to wait (a 429's Retry-After), or 0. */
    rateLimitedForMs: number;
  } | null;
}

/**
 * Claims up to `limit` due mirror sends, one per conversation, the applications in turn (see
 * {@linkcode claimedInSendOrder}).
 */
export async function claimMirrorSends(
  sql: Tx,
  options: Omit<ChannelClaimOptions, "kind">,
): Promise<ClaimRound<ClaimedMirror>> {
  // deno-lint-ignore no-explicit-any
  const rows = await sql<any[]>`
    ${claimedInSendOrder(sql, { kind: "slack", ...options })}
    SELECT round.walked_to, c.app_id, c.id, c.topic, c.attempts, c.claimed_at, c.turn,
      conv.id AS chat_id, conv.status, conv.channel, cl.name AS visitor_name,
      cl.email AS visitor_email,
      m.id AS message_id, m.sender_type, m.sender_name, m.message_type, m.content, m.payload,
      m.internal, CASE WHEN m.status = 'failed' THEN coalesce(m.failure_title, 'failed') END
        AS failure,
      coalesce(sm.parts, 0) AS posted_parts, sm.ts AS first_ts, m.reply_to_message_id, m.referral,
      q.id IS NOT NULL AND q.deleted_at IS NULL AS quoted_kept, q.sender_type AS quoted_sender_type,
      q.sender_name AS quoted_sender_name, q.message_type AS quoted_message_type,
      q.content AS quoted_content, q.payload AS quoted_payload,
      s.team_id, s.channel_id, s.bot_token_sealed, s.bot_id,
      extract(epoch FROM ra.first_at)::float8 AS root_first_at,
      extract(epoch FROM ra.last_at)::float8 AS root_last_at, ra.searched_to AS root_searched_to,
      s.bot_user_id,
      greatest(0, ceil(extract(epoch FROM s.rate_limited_until - clock_timestamp()) * 1000))::float8
        AS rate_limited_for_ms,
      t.channel_id AS thread_channel, t.thread_ts
    FROM ${claimRound(sql)}
    LEFT JOIN conversations conv
      ON conv.app_id = c.app_id AND conv.id = (c.payload ->> 'conversation_id')::bigint
    LEFT JOIN clients cl ON cl.app_id = conv.app_id AND cl.id = conv.client_id
    LEFT JOIN messages m ON m.app_id = c.app_id AND m.conversation_id = conv.id
      AND m.id = (c.payload ->> 'message_id')::bigint AND m.deleted_at IS NULL
    LEFT JOIN messages q ON q.app_id = m.app_id AND q.conversation_id = m.conversation_id
      AND q.id = m.reply_to_message_id
    LEFT JOIN slack_messages sm ON sm.app_id = m.app_id AND sm.message_id = m.id
    LEFT JOIN slack_installations s ON s.app_id = c.app_id
    LEFT JOIN slack_threads t ON t.app_id = c.app_id AND t.conversation_id = conv.id
      AND t.team_id = s.team_id
    LEFT JOIN slack_root_attempts ra ON ra.app_id = c.app_id AND ra.conversation_id = conv.id
      AND ra.team_id = s.team_id AND ra.channel_id = s.channel_id`;
  return roundOf(rows, (row): ClaimedMirror => ({
    appId: row.app_id,
    id: row.id,
    topic: row.topic === "chat" ? "chat" : "message",
    attempts: row.attempts,
    claimedAt: row.claimed_at,
    turn: row.turn,
    conversation: row.chat_id === null ? null : {
      id: row.chat_id,
      status: row.status,
      channel: row.channel,
      visitorName: row.visitor_name,
      visitorEmail: row.visitor_email,
    },
    message: row.message_id === null ? null : {
      id: row.message_id,
      senderType: row.sender_type,
      senderName: row.sender_name,
      messageType: row.message_type,
      content: row.content,
      payload: row.payload,
      internal: row.internal,
      failure: row.failure,
      postedParts: row.posted_parts,
      firstTs: row.first_ts,
      replyTo: row.reply_to_message_id === null ? null : quotedOf(row),
      referral: row.referral,
    },
    thread: row.thread_ts === null ? null : { channelId: row.thread_channel, ts: row.thread_ts },
    rootAttempt: row.root_first_at === null
      ? null
      : { firstAt: row.root_first_at, lastAt: row.root_last_at, searchedTo: row.root_searched_to },
    installation: row.team_id === null ? null : {
      teamId: row.team_id,
      channelId: row.channel_id,
      botId: row.bot_id,
      botUserId: row.bot_user_id,
      botTokenSealed: row.bot_token_sealed,
      rateLimitedForMs: row.rate_limited_for_ms ?? 0,
    },
  }));
}

/** The quoted message of a claimed row; one no longer there counts as deleted. */
// deno-lint-ignore no-explicit-any
function quotedOf(row: any): QuotedMessage {
  if (row.quoted_kept !== true) return { deleted: true };
  return {
    deleted: false,
    senderType: row.quoted_sender_type,
    senderName: row.quoted_sender_name,
    messageType: row.quoted_message_type,
    content: row.quoted_content,
    payload: row.quoted_payload,
  };
}

/**
 * Holds the workspace's mirror posts back for `waitMs` (Slack's 429 `Retry-After`), for every
 * sender on every instance; a later deadline already set stays.
 */
export async function pauseSlackWorkspace(
  sql: Tx,
  teamId: string,
  waitMs: number,
): Promise<void> {
  await sql`
    UPDATE slack_installations
    SET rate_limited_until = greatest(rate_limited_until,
      clock_timestamp() + make_interval(secs => ${waitMs / 1000}))
    WHERE team_id = ${teamId}`;
}

/** Remembers a conversation's thread (its root message) in a workspace's channel. */
export async function saveThread(sql: Tx, thread: RootPlace & { ts: string }): Promise<void> {
  await sql`
    WITH attempted AS (
      DELETE FROM slack_root_attempts
      WHERE app_id = ${thread.appId} AND conversation_id = ${thread.chatId}
    )
    INSERT INTO slack_threads (app_id, conversation_id, team_id, channel_id, thread_ts)
    VALUES (${thread.appId}, ${thread.chatId}, ${thread.teamId}, ${thread.channelId},
      ${thread.ts})
    ON CONFLICT (app_id, conversation_id) DO UPDATE SET team_id = EXCLUDED.team_id,
      channel_id = EXCLUDED.channel_id, thread_ts = EXCLUDED.thread_ts`;
}

/**
 * Notes that a conversation's root is about to be posted in `channelId` (see
 * `slack_root_attempts`): from then on, until its thread is saved, an attempt looks for it first.
 */
export async function noteRootAttempt(sql: Tx, root: RootPlace): Promise<void> {
  await sql`
    INSERT INTO slack_root_attempts (app_id, conversation_id, team_id, channel_id)
    VALUES (${root.appId}, ${root.chatId}, ${root.teamId}, ${root.channelId})
    ON CONFLICT (app_id, conversation_id, team_id, channel_id)
    DO UPDATE SET last_at = clock_timestamp(), searched_to = NULL`;
}

/** The place of a root in the mirror's tables: its conversation, workspace and channel. */
export interface RootPlace {
  appId: number;
  chatId: number;
  teamId: string;
  channelId: string;
}

/** Forgets a root's attempt that Slack refused outright (nothing was posted). */
export async function forgetRootAttempt(sql: Tx, root: RootPlace): Promise<void> {
  await sql`
    DELETE FROM slack_root_attempts
    WHERE app_id = ${root.appId} AND conversation_id = ${root.chatId}
      AND team_id = ${root.teamId} AND channel_id = ${root.channelId}`;
}

/** Notes that a search for a lost root has read the channel back to `ts`. */
export async function noteRootSearched(sql: Tx, root: RootPlace, ts: string): Promise<void> {
  await sql`
    UPDATE slack_root_attempts SET searched_to = ${ts}
    WHERE app_id = ${root.appId} AND conversation_id = ${root.chatId}
      AND team_id = ${root.teamId} AND channel_id = ${root.channelId}`;
}

/** A message's posts in Slack: `ts` is the first's, `parts` how many have landed. */
export interface MirroredParts {
  appId: number;
  messageId: number;
  teamId: string;
  channelId: string;
  ts: string;
  parts: number;
}

/**
 * Remembers that the first `parts` Slack posts of a message are there: the first part's `ts`
 * identifies the message in Slack (later parts only count).
 */
export async function saveMirroredParts(sql: Tx, link: MirroredParts): Promise<void> {
  await sql`
    INSERT INTO slack_messages AS sm (app_id, message_id, team_id, channel_id, ts, parts)
    VALUES (${link.appId}, ${link.messageId}, ${link.teamId}, ${link.channelId}, ${link.ts},
      ${link.parts})
    ON CONFLICT (app_id, message_id) DO UPDATE SET parts = greatest(sm.parts, EXCLUDED.parts)`;
}

/** Remembers which Slack messages mirror which Parley messages, in one statement. */
export async function saveMirroredMessages(
  sql: Tx,
  links: { appId: number; messageId: number; teamId: string; channelId: string; ts: string }[],
): Promise<void> {
  if (links.length === 0) return;
  await sql`
    INSERT INTO slack_messages (app_id, message_id, team_id, channel_id, ts)
    SELECT * FROM unnest(${links.map((l) => l.appId)}::bigint[],
      ${links.map((l) => l.messageId)}::bigint[], ${links.map((l) => l.teamId)}::text[],
      ${links.map((l) => l.channelId)}::text[], ${links.map((l) => l.ts)}::text[])
    ON CONFLICT DO NOTHING`;
}

/**
 * Records a mirror send while its claim holds: done, a retry later, or given up. An `uncounted`
 * retry (Slack's rate limit) does not use up one of the send's attempts.
 */
export async function recordMirrorOutcome(
  sql: Tx,
  send: { appId: number; id: number; claimedAt: string },
  outcome:
    | { state: "succeeded" | "failed" }
    | { state: "pending"; retryInMs: number; uncounted?: boolean },
  error: string | null,
): Promise<void> {
  const retryIn = outcome.state === "pending" ? outcome.retryInMs / 1000 : 0;
  const counted = outcome.state === "pending" && outcome.uncounted ? 0 : 1;
  await sql`
    UPDATE outbox SET state = ${outcome.state}, attempts = attempts + ${counted}::int,
      last_error = ${error},
      run_at = clock_timestamp() + make_interval(secs => ${retryIn}), claimed_until = NULL,
      claimed_at = NULL
    WHERE app_id = ${send.appId} AND id = ${send.id}
      AND claimed_at = ${send.claimedAt}::timestamptz`;
}
