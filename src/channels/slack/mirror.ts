/**
 * The Slack mirror's sender (CONTRACT §6.2): one claimed send becomes Slack Web API calls
 * (`web_client.ts`). A conversation's first send posts its root message (the visitor, the
 * channel, the status, a `Close` button) and remembers the thread; a message is posted in that
 * thread under its sender's name, rendered with the Block Kit renderer (a customer's reply opens
 * with a line quoting the message it answers); a status change updates the root. A rate-limited
 * call goes back to the outbox for Slack's `Retry-After` (up to 30 min,
 * using none of its attempts: a wait inside the call could outlast the claim and post twice), and
 * the workspace's other sends, on every instance, wait too rather than each meet its own 429;
 * other failures retry on the channel schedule, and a refusal Slack will repeat (a revoked token,
 * a deleted channel) gives up, logged; a bot removed from the channel joins it again first.
 */
import type { ClaimedMirror, MirroredParts, RootPlace } from "../../db/slack_sends.ts";
import {
  MAX_SEND_RETRY_AFTER_MS,
  nextSendRetryDelayMs,
} from "../../domain/channel_send_schedule.ts";
import {
  renderNotDelivered,
  renderSlackMessage,
  renderSlackPlainText,
  type SlackBlock,
} from "../../domain/slack_blocks.ts";
import { renderAdReferralLine } from "../../domain/ad_referral.ts";
import { log } from "../../log.ts";
import { renderReplyContext } from "../../domain/slack_reply_context.ts";
import { escapeMrkdwn } from "../../domain/slack_mrkdwn.ts";
import {
  SlackCallError,
  type SlackErrorInfo,
  slackErrorOf,
  type SlackWebClient,
} from "./web_client.ts";

/** The `action_id` of the root message's `Close` button. */
export const CLOSE_ACTION_ID = "parley_close";

/** The `block_id` of a conversation's root actions. */
export function chatBlockId(chatId: number): string {
  return `parley_chat:${chatId}`;
}

/** Reads back {@linkcode chatBlockId}; null for anything else. */
export function parseChatBlockId(blockId: string): number | null {
  const match = /^parley_chat:([1-9]\d{0,15})$/.exec(blockId);
  return match ? Number(match[1]) : null;
}

/** What the sender needs from the outside world. */
export interface MirrorDeps {
  /** A Web API client for a bot token (sealed). */
  clientFor(botTokenSealed: string): SlackWebClient;
  /** Remembers a conversation's thread: its root's `ts`. */
  saveThread(thread: RootPlace & { ts: string }): Promise<void>;
  /** Notes that a conversation's root is about to be posted (see `noteRootAttempt`). */
  noteRootAttempt(root: RootPlace): Promise<void>;
  /** Forgets the attempt of a root Slack refused outright. */
  forgetRootAttempt(root: RootPlace): Promise<void>;
  /** Notes how far back a search for a lost root has read the channel. */
  noteRootSearched(root: RootPlace, ts: string): Promise<void>;
  /** Remembers that the first `parts` posts of a message are in Slack (`ts`: the first's). */
  saveMirrored(link: MirroredParts): Promise<void>;
  /** Records how the send ended; an `uncounted` retry uses none of its attempts. */
  record(
    send: ClaimedMirror,
    outcome:
      | { state: "succeeded" | "failed" }
      | { state: "pending"; retryInMs: number; uncounted?: boolean },
    error: string | null,
  ): Promise<void>;
  /**
   * Holds the workspace's posts back for `waitMs` after Slack's 429, for every sender (a claim
   * reads it as the installation's `rateLimitedForMs`).
   */
  pauseWorkspace(teamId: string, waitMs: number): Promise<void>;
  /** @default Math.random */
  random?: () => number;
}

/** Slack errors that another attempt will not fix. */
const FINAL_ERRORS = new Set([
  "invalid_auth",
  "account_inactive",
  "token_revoked",
  "not_authed",
  "channel_not_found",
  "is_archived",
  "not_in_channel",
  "invalid_blocks",
  "msg_too_long",
  "no_text",
]);

/**
 * `conversations.join`'s failures that say nothing about the channel (Slack's outage, a call that
 * did not get through): worth another try later. Any other refusal (a private channel, an archived
 * one, a missing scope, …) stands.
 */
const JOIN_NOT_MADE_NOW = new Set([
  "request_error",
  "http_error",
  "internal_error",
  "fatal_error",
  "service_unavailable",
  "request_timeout",
]);

/**
 * The `ts` a message's posts are remembered under when the first one's answer was cut (Slack
 * posted it; its `ts` never came): theirs are digits and a dot, so no event of Slack's ever names
 * it, and the parts posted are still counted (a retry goes on after them, a "Not delivered" line
 * still follows).
 */
export function cutAnswerTs(messageId: number): string {
  return `cut:${messageId}`;
}

/** `chat.update`'s errors for a root that is no longer there to update. */
const ROOT_GONE = new Set(["message_not_found", "cant_update_message"]);

/** The root message of a conversation: who, where, its status, and `Close` while it is open. */
export function rootMessage(conversation: NonNullable<ClaimedMirror["conversation"]>) {
  const who = conversation.visitorName ?? conversation.visitorEmail ??
    `Visitor #${conversation.id}`;
  // Its own asterisks as look-alikes: one would end the bold early (`*Eve *boss**`), an address
  // with one (valid, if rare) too. Other markers stay: `_` and `~` format only between word
  // boundaries, which an address's or a name's seldom give them.
  const bold = escapeMrkdwn(who).replaceAll("*", "\u2217");
  const line = `*${bold}* · ${conversation.channel} · conversation ${conversation.id} · ` +
    (conversation.status === "open" ? "open" : "closed");
  const blocks: SlackBlock[] = [{
    type: "section",
    text: { type: "mrkdwn", text: line, verbatim: true },
  }];
  if (conversation.status === "open") {
    blocks.push({
      type: "actions",
      block_id: chatBlockId(conversation.id),
      elements: [{
        type: "button",
        text: { type: "plain_text", text: "Close", emoji: true },
        action_id: CLOSE_ACTION_ID,
        value: String(conversation.id),
      }],
    });
  }
  return {
    text: `${escapeMrkdwn(who)} · ${conversation.channel} · ${conversation.status}`,
    blocks,
  };
}

/** The `event_type` of the metadata on a conversation's root post, by which it is found again. */
export const ROOT_EVENT_TYPE = "parley_conversation";
/** Pages of the channel's history (15 posts each, the most Slack gives some apps) searched. */
const ROOT_SEARCH_PAGES = 5;
/**
 * Slack's clock may be this far from ours, either way: a root's ts is looked for this much before
 * its first attempt and after its last one (plus the call's own 10 s limit).
 */
const ROOT_SEARCH_MARGIN_SECONDS = 60;

/**
 * A search of the channel's history for a lost root that could not be finished: Slack refused a
 * page (`code` its error), or the pages one attempt reads ran out (`incomplete`: it goes on from
 * where it stopped). The send waits and tries again.
 */
export class RootSearchError extends Error {
  /** Slack's error code, or `incomplete`. */
  readonly code: string;
  /** How long Slack asked to wait (a 429's Retry-After), if it did. */
  readonly retryAfterMs: number | null;
  constructor(info: SlackErrorInfo, options?: ErrorOptions) {
    super("Cannot look for the conversation's root in the channel", options);
    this.name = "RootSearchError";
    this.code = info.code;
    this.retryAfterMs = info.retryAfterMs;
  }
}

/**
 * Posts the root of the send's conversation and answers its `ts`, and whether it was found
 * rather than posted. A root attempted before without its ts being learnt (an answer cut, a
 * timeout, a crash before the thread was saved) is first looked for in the channel by the
 * metadata it carries, and one whose answer is cut now, at once: posting it again would open a
 * second thread.
 */
async function postRoot(
  client: SlackWebClient,
  deps: MirrorDeps,
  send: ClaimedMirror,
  root: RootPlace,
): Promise<{ ts: string; found: boolean }> {
  const conversation = send.conversation!;
  if (send.rootAttempt) {
    const found = await findRoot(client, deps, send, root, send.rootAttempt);
    if (found !== null) return { ts: found, found: true };
  }
  await deps.noteRootAttempt(root);
  const postedAt = Date.now() / 1000;
  try {
    const posted = await client.chat.postMessage({
      channel: root.channelId,
      ...rootMessage(conversation),
      metadata: {
        event_type: ROOT_EVENT_TYPE,
        event_payload: { app_id: send.appId, chat_id: conversation.id },
      },
    });
    return { ts: posted.ts!, found: false };
  } catch (error) {
    if (!(error instanceof SlackCallError)) throw error;
    if (!error.answered) {
      // A 429 or a refusal says nothing was posted; a first attempt needs no search then.
      const { code } = error.info;
      const refused = code !== "request_error" && code !== "http_error";
      if (refused && send.rootAttempt === null) await deps.forgetRootAttempt(root);
      throw error;
    }
    const attempt = {
      firstAt: send.rootAttempt?.firstAt ?? postedAt,
      lastAt: postedAt,
      searchedTo: null,
    };
    // Not listed yet: the send is tried again later and looks again before it posts.
    const found = await findRoot(client, deps, send, root, attempt);
    if (found === null) throw error;
    return { ts: found, found: true };
  }
}

/**
 * The `ts` of the send's conversation's root in the channel — a post of our bot carrying its
 * metadata, within the attempts' times — or null when the whole window was read without it. It
 * reads newest first, from where an earlier search stopped, noting how far back it got; a search
 * Slack refuses, or one longer than an attempt reads, throws {@linkcode RootSearchError}.
 */
async function findRoot(
  client: SlackWebClient,
  deps: MirrorDeps,
  send: ClaimedMirror,
  root: RootPlace,
  attempt: NonNullable<ClaimedMirror["rootAttempt"]>,
): Promise<string | null> {
  const { channelId, botId, botUserId } = send.installation!;
  const oldest = Math.max(0, attempt.firstAt - ROOT_SEARCH_MARGIN_SECONDS).toFixed(6);
  let latest = attempt.searchedTo ??
    (attempt.lastAt + 10 + ROOT_SEARCH_MARGIN_SECONDS).toFixed(6);
  let inclusive = attempt.searchedTo === null;
  for (let page = 0; page < ROOT_SEARCH_PAGES; page++) {
    let answer: Awaited<ReturnType<SlackWebClient["conversations"]["history"]>>;
    try {
      answer = await client.conversations.history({
        channel: channelId,
        oldest,
        latest,
        inclusive,
        limit: 15,
        include_all_metadata: true,
      });
    } catch (error) {
      throw new RootSearchError(slackErrorOf(error), { cause: error });
    }
    const messages = answer.messages ?? [];
    for (const message of messages) {
      const payload = message.metadata?.event_payload as Record<string, unknown> | undefined;
      // Slack may hand the payload's numbers back as text.
      if (
        message.metadata?.event_type === ROOT_EVENT_TYPE &&
        String(payload?.app_id) === String(send.appId) &&
        String(payload?.chat_id) === String(send.conversation!.id) &&
        (botId === null ? message.user === botUserId : message.bot_id === botId) &&
        typeof message.ts === "string"
      ) return message.ts;
    }
    const last = messages.at(-1)?.ts;
    if (!answer.has_more || last === undefined) return null;
    latest = last;
    inclusive = false;
    await deps.noteRootSearched(root, last);
  }
  throw new RootSearchError({ code: "incomplete", retryAfterMs: null });
}

/** The icon of a visitor's posts (customized like the username: `chat:write.customize`). */
export const VISITOR_ICON = ":bust_in_silhouette:";

/** The name a message is posted under. */
function senderLabel(
  message: { senderType: string; senderName: string | null },
  visitor: string,
): string {
  switch (message.senderType) {
    case "visitor":
      return visitor;
    case "flow":
      return "Flow";
    case "ai":
      return message.senderName ?? "AI";
    case "system":
      return "Parley";
    default:
      return message.senderName ?? (message.senderType === "bot" ? "Bot" : "Agent");
  }
}

/** Sends one claimed mirror send and records how it went. */
export async function sendMirror(deps: MirrorDeps, send: ClaimedMirror): Promise<void> {
  const { installation, conversation } = send;
  if (!installation || !conversation) return deps.record(send, { state: "succeeded" }, null);
  const random = deps.random ?? Math.random;
  /** Back to the outbox for `waitMs` and up to a fifth more (spread), using none of its attempts. */
  const postpone = (waitMs: number, why = "Slack: ratelimited") => {
    const retryInMs = Math.min(Math.round(waitMs * (1 + 0.2 * random())), MAX_SEND_RETRY_AFTER_MS);
    return deps.record(send, { state: "pending", retryInMs, uncounted: true }, why);
  };
  if (installation.rateLimitedForMs > 0) return postpone(installation.rateLimitedForMs);
  const client = deps.clientFor(installation.botTokenSealed);
  try {
    let thread = send.thread;
    // A root posted now shows the conversation as it is; an existing one is updated for a status
    // change, and one found again since it shows the conversation as it was then.
    let showStatus = send.topic === "chat";
    if (!thread) {
      const place: RootPlace = {
        appId: send.appId,
        chatId: conversation.id,
        teamId: installation.teamId,
        channelId: installation.channelId,
      };
      const root = await postRoot(client, deps, send, place);
      thread = { channelId: place.channelId, ts: root.ts };
      await deps.saveThread({ ...place, ts: root.ts });
      showStatus = root.found;
    }
    if (showStatus) {
      await client.chat.update({
        channel: thread.channelId,
        ts: thread.ts,
        ...rootMessage(conversation),
      }).catch((error) => {
        // A member deleted the root: its status has nowhere to show, and retrying would hold
        // the conversation's later posts back for half an hour. The thread goes on (Slack keeps
        // a deleted parent's replies), so do this send's posts.
        if (!ROOT_GONE.has(slackErrorOf(error).code)) throw error;
        log("info", "slack root post gone: status not shown", {
          app_id: send.appId,
          team_id: installation!.teamId,
          conversation_id: conversation!.id,
        });
      });
    }
    const message = send.message;
    if (send.topic === "message" && message) {
      // Posted under the sender's name (CONTRACT §6.2); a visitor's posts carry a person's icon
      // of their own, so that a visitor who calls themselves "Parley" or "Flow" does not pass for
      // one of ours, whose posts show the app's icon.
      const visitor = conversation.visitorName ?? `Visitor #${conversation.id}`;
      const source = {
        id: message.id,
        message_type: message.messageType,
        content: message.content,
        payload: message.payload,
      };
      // A reply opens with the message it quotes, and a customer's first message with the ad
      // they came from, inside its first post: the posts stay the same in number (a retry counts
      // them) whatever that message says or becomes.
      const quoted = message.replyTo;
      const referral = message.referral;
      const leadLines = [
        ...(quoted === null ? [] : [renderReplyContext(
          quoted.deleted ? null : {
            sender: senderLabel(quoted, visitor),
            message_type: quoted.messageType,
            content: quoted.content,
            payload: quoted.payload,
          },
        )]),
        ...(referral === null ? [] : [renderAdReferralLine(referral)]),
      ];
      const lead = leadLines.length === 0 ? undefined : leadLines.join("\n");
      // A web visitor's file is at an address they typed; a WhatsApp customer's, at Parley's.
      const showLinkAddresses = message.senderType === "visitor" && conversation.channel === "web";
      const parts = renderSlackMessage(source, { lead, showLinkAddresses });
      if (message.failure !== null) parts.push(renderNotDelivered(message.failure));
      // Each part is remembered as it lands: a retry goes on from the first part not posted,
      // and a message already there (or typed in Slack) is not posted again.
      let first = message.firstTs;
      for (let index = message.postedParts; index < parts.length; index++) {
        const post = {
          channel: thread.channelId,
          thread_ts: thread.ts,
          username: senderLabel(message, visitor),
          ...(message.senderType === "visitor" ? { icon_emoji: VISITOR_ICON } : {}),
          ...parts[index],
        };
        const posted = await client.chat.postMessage(post).catch((error) => {
          // Slack answered 200 and the answer was cut: the part is there, under a ts we never
          // learnt; posting it again would show it twice.
          if (error instanceof SlackCallError && error.answered) return { ok: true, ts: undefined };
          // Blocks Slack refuses though they passed our checks (an image it could not download,
          // say): the part goes as its whole plain text rather than not at all (CONTRACT §4.2).
          if (slackErrorOf(error).code !== "invalid_blocks" || !post.blocks) throw error;
          const { blocks: _refused, ...plain } = post;
          const text = renderSlackPlainText(source, { lead, showLinkAddresses })[index] ??
            plain.text;
          return client.chat.postMessage({ ...plain, text });
        });
        first ??= posted.ts ?? cutAnswerTs(message.id);
        await deps.saveMirrored({
          appId: send.appId,
          messageId: message.id,
          teamId: installation.teamId,
          channelId: thread.channelId,
          ts: first,
          parts: index + 1,
        });
      }
    }
    return deps.record(send, { state: "succeeded" }, null);
  } catch (error) {
    if (error instanceof RootSearchError) {
      const why = `Slack: ${error.code} (root search)`;
      // A search goes on from where it stopped, so waiting uses no attempt; the history's own
      // limit (as low as one call a minute for some apps) holds none of the workspace's posts.
      if (error.code === "incomplete") return postpone(1_000, why);
      if (error.code === "ratelimited") {
        return postpone(Math.max(error.retryAfterMs ?? 60_000, 1_000), why);
      }
      return await failed(error.code, why);
    }
    const { code, retryAfterMs } = slackErrorOf(error);
    if (code === "ratelimited") {
      // Slack's rate limit is not the send's fault: it waits as asked without using an attempt,
      // and the workspace's other sends wait with it.
      const waitMs = Math.min(Math.max(retryAfterMs ?? 1_000, 1_000), MAX_SEND_RETRY_AFTER_MS);
      await deps.pauseWorkspace(installation.teamId, waitMs);
      return postpone(waitMs);
    }
    return await failed(code, `Slack: ${code}`);
  }

  /** Records a send Slack refused with `code` (`why` in its record): tried again, or given up. */
  async function failed(code: string, why: string): Promise<void> {
    const channel = send.thread?.channelId ?? installation!.channelId;
    const next = nextSendRetryDelayMs(send.attempts + 1, { random: random() });
    if (code === "not_in_channel") {
      // Someone removed the bot from the channel: it joins it again (`channels:join`; also when
      // this send has no attempt left, for the conversation's next posts) and the send is tried
      // again in a second, with one of its attempts (should joining not last). A join Slack
      // could not make now (its rate limit, an outage) is tried again later too.
      const refused = await joinRefusal(client, channel);
      if (next !== null) {
        if (refused === null) return deps.record(send, { state: "pending", retryInMs: 1_000 }, why);
        const joinWhy = `${why} (join: ${refused.code})`;
        // Slack's rate limit is not the send's fault: waited out without using an attempt.
        if (refused.code === "ratelimited") {
          return postpone(Math.max(refused.retryAfterMs ?? 1_000, 1_000), joinWhy);
        }
        if (JOIN_NOT_MADE_NOW.has(refused.code)) {
          return deps.record(send, { state: "pending", retryInMs: next }, joinWhy);
        }
      }
    }
    const retryInMs = FINAL_ERRORS.has(code) ? null : next;
    if (retryInMs === null) {
      // The conversation's thread misses a post: those who run Parley are to hear of it.
      log("warn", "slack mirror post given up", {
        app_id: send.appId,
        team_id: installation!.teamId,
        channel,
        conversation_id: conversation!.id,
        message_id: send.message?.id ?? null,
        error: why,
      });
    }
    return deps.record(
      send,
      retryInMs === null ? { state: "failed" } : { state: "pending", retryInMs },
      why,
    );
  }
}

/**
 * Joins `channel` (again; nothing to do when the bot is in it already): null once in it, else
 * Slack's refusal.
 */
async function joinRefusal(
  client: SlackWebClient,
  channel: string,
): Promise<{ code: string; retryAfterMs: number | null } | null> {
  try {
    await client.conversations.join({ channel });
    return null;
  } catch (error) {
    return slackErrorOf(error);
  }
}
