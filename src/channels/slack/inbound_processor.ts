/**
 * What happens to a Slack request after its acknowledgement (CONTRACT §6.2). An event names its
 * workspace; a `message` in a mirrored thread from a workspace member becomes an agent reply
 * (`note:` ones internal), with the member's display name; edits and deletions follow the
 * mirrored message; the app's own posts, top-level chatter and unmapped threads change nothing.
 * A `block_actions` click on a Flow button goes to the widget's click entry point, one on a root
 * message's `Close` closes the conversation — only for the workspace's own application. Requests
 * a crash left unapplied are applied again by {@linkcode SlackInboundProcessor.recover}.
 */
import { storableText } from "../../domain/json_document.ts";
import type { SlackWebClient } from "./web_client.ts";
import type { Sql } from "../../db/client.ts";
import {
  appActorKey,
  type AppCommand,
  type CloseChatCommand,
  type CommandResult,
  type SlackChange,
  type SlackEventCommand,
  type SlackReplyFile,
  type StreamPlace,
  type VisitorActionCommand,
} from "../../actors/protocol.ts";
import { findInstallationByTeam, type SlackInstallation } from "../../db/slack_installations.ts";
import {
  findMessageConversation,
  findThreadConversation,
  findWaitingSlackDeliveries,
  markSlackDeliveryProcessed,
  MAX_SLACK_REPLY_FILES,
  recordSlackDeliveryFailure,
} from "../../db/slack_inbound.ts";
import { parseSlackAction } from "../../domain/slack_blocks.ts";
import { decodeSlackText, mentionedUsers } from "../../domain/slack_text.ts";
import { createLruCache } from "../../cache/lru_cache.ts";
import { describeError, log } from "../../log.ts";
import { CLOSE_ACTION_ID, parseChatBlockId } from "./mirror.ts";
import type { MediaLinks } from "../media_links.ts";
import { APPLY_WINDOW_MS } from "../apply_window.ts";
import {
  type ApplyAttempt,
  applyCountingAttempts,
  asApplyFailure,
  createOrderedApply,
  type OrderedApplyOptions,
  RetryableApplyError,
} from "../ordered_apply.ts";
import { findUnprocessedSlackDeliveries } from "../../db/stored_requests.ts";
import { createLiveGate, recoverStored, type RecoveryOptions } from "../recover_stored.ts";
import { createEarlierWaits } from "../earlier_deliveries.ts";
import {
  isOrganisationProfile,
  isSlackId,
  judgeAuthorTeam,
  messageAuthorTeam,
  parseSlackRequest,
  type SlackDocument,
  type SlackRequestContext,
  slackTeamOf,
} from "../../domain/slack_request.ts";

/** What the processor needs. */
export interface SlackInboundDeps {
  sql: Sql;
  ask(key: string, command: AppCommand): Promise<CommandResult>;
  /** A Web API client for a bot token (sealed). */
  clientFor(botTokenSealed: string): SlackWebClient;
  /** Signs links to the Slack media proxy. */
  mediaLinks: MediaLinks;
  /** How long requests wait to be applied together (see apply_window.ts). @default APPLY_WINDOW_MS */
  applyWindowMs?: number;
  /** How a request that failed for a reason that may pass is retried (tests shorten it). */
  retry?: Pick<OrderedApplyOptions, "retryDelaysMs" | "retryWithinMs">;
  /**
   * How long a wait for another instance's earlier requests goes on while none of them is
   * applied. @default EARLIER_WAIT_MS
   */
  earlierWaitMs?: number;
}

/** The processor. */
export interface SlackInboundProcessor {
  /**
   * Applies stored request `id` whose raw body is `body`; `document` is that body already parsed
   * (see `parseSlackRequest`), when the caller had to parse it anyway. It is applied once the
   * requests `earlier` (another instance's, stored before it) are (or once none of them was for
   * `EARLIER_WAIT_MS`).
   */
  process(
    kind: "event" | "action",
    id: number,
    body: Uint8Array,
    document?: SlackDocument,
    earlier?: readonly number[],
  ): Promise<void>;
  /**
   * Applies the requests a crash left unapplied (received over a minute ago, unless
   * `olderThanSeconds` says otherwise); resolves to their count.
   */
  recover(options?: RecoveryOptions): Promise<number>;
  /** Stops retrying failed requests (at shutdown): recovery applies them after the restart. */
  stop(): void;
}

/** Creates the processor. */
export function createSlackInboundProcessor(deps: SlackInboundDeps): SlackInboundProcessor {
  const profiles = createLruCache<string, { user: SlackDocument | null; until: number }>(10_000);
  /** Per workspace, the waits for other instances' requests. */
  const earlierWaits = createEarlierWaits<string>(
    (team, ids) => findWaitingSlackDeliveries(deps.sql, team, ids),
    {
      patienceMs: deps.earlierWaitMs,
      onGaveUp: (key, left) =>
        log("warn", "slack request applied before another instance's earlier ones", {
          team_id: key,
          count: left.length,
        }),
    },
  );
  /** Per workspace, requests are applied in the order they arrived. */
  const order = createOrderedApply({
    name: "slack",
    windowMs: deps.applyWindowMs ?? APPLY_WINDOW_MS,
    ...deps.retry,
  });
  /** Installations by workspace, reused for 5 s (a re-install shows within that). */
  const installations = new Map<
    string,
    { installation: SlackInstallation | null; until: number }
  >();
  /** Threads never move to another conversation: their mapping is kept. */
  const threads = createLruCache<string, { appId: number; chatId: number }>(50_000);

  async function installationOf(teamId: unknown): Promise<SlackInstallation | null> {
    if (!isSlackId(teamId)) return null;
    const cached = installations.get(teamId);
    if (cached && cached.until > Date.now()) return cached.installation;
    const installation = await findInstallationByTeam(deps.sql, teamId);
    if (installations.size > 10_000) installations.clear();
    installations.set(teamId, { installation, until: Date.now() + 5_000 });
    return installation;
  }

  /**
   * A user's profile as `users.info` gives it (cached 10 minutes), or null when Slack would not
   * say (cached a minute).
   */
  async function profileOf(
    installation: SlackInstallation,
    userId: string,
  ): Promise<SlackDocument | null> {
    const key = `${installation.teamId}:${userId}`;
    const cached = profiles.get(key);
    if (cached && cached.until > Date.now()) return cached.user;
    let user: SlackDocument | null = null;
    try {
      const info = await deps.clientFor(installation.botTokenSealed).users.info({ user: userId });
      user = info.user ?? null;
    } catch (error) {
      log("warn", "slack users.info failed", describeError(error));
    }
    profiles.set(key, { user, until: Date.now() + (user === null ? 60_000 : 600_000) });
    return user;
  }

  /** A member's display name; their id when Slack does not say. */
  async function displayName(installation: SlackInstallation, userId: string): Promise<string> {
    const user = await profileOf(installation, userId);
    return user?.profile?.display_name || user?.profile?.real_name || user?.real_name ||
      user?.name || userId;
  }

  /**
   * Whether `userId`, whose request names `authorTeam`, is one of the business's people (see
   * `judgeAuthorTeam`): where the team named leaves it open, their profile decides, and a user
   * Slack would not describe is taken for an outsider.
   */
  async function isAgent(
    installation: SlackInstallation,
    userId: unknown,
    authorTeam: unknown,
    context: SlackRequestContext,
  ): Promise<boolean> {
    const verdict = judgeAuthorTeam(authorTeam, context);
    if (verdict !== "ask") return verdict === "member";
    if (!isSlackId(userId)) return false;
    const user = await profileOf(installation, userId);
    return user !== null && isOrganisationProfile(user, context);
  }

  /** Slack's `text` as the visitor is to read it, mentioned members by name. */
  async function readable(installation: SlackInstallation, text: string): Promise<string> {
    const ids = mentionedUsers(text);
    const found = new Map(
      await Promise.all(ids.map(async (id) => [id, await displayName(installation, id)] as const)),
    );
    return decodeSlackText(text, { user: (id) => found.get(id) });
  }

  function isOwn(installation: SlackInstallation, message: SlackDocument): boolean {
    return Boolean(message?.bot_id) || message?.user === installation.botUserId;
  }

  /** The conversation a thread of the installation's channel mirrors, or null. */
  async function threadOf(
    installation: SlackInstallation,
    channelId: string,
    threadTs: string,
  ): Promise<{ appId: number; chatId: number } | null> {
    const threadKey = `${installation.teamId}:${channelId}:${threadTs}`;
    let thread = threads.get(threadKey) ?? null;
    if (!thread) {
      thread = await findThreadConversation(deps.sql, {
        teamId: installation.teamId,
        channelId,
        threadTs,
      });
      if (thread) threads.set(threadKey, thread);
    }
    return thread && thread.appId === installation.appId ? thread : null;
  }

  async function changeOf(
    installation: SlackInstallation,
    event: SlackDocument,
    context: SlackRequestContext,
  ): Promise<SlackChange | null> {
    if (event?.type !== "message" || !isSlackId(event.channel)) return null;
    const channelId: string = event.channel;
    if (event.subtype === "message_changed") {
      const message = event.message;
      if (!message || isOwn(installation, message) || !isSlackId(message.ts)) return null;
      const text = storableText(await readable(installation, String(message.text ?? "")));
      const edit = {
        kind: "edit" as const,
        channelId,
        ts: message.ts,
        text,
        internal: isNote(text),
      };
      const reply = await threadReplyOf(installation, channelId, message);
      if (!reply) return edit;
      // Parley lacking the reply (its first delivery failed, Slack's retry is to come), the edit
      // may store it: a member's reply of a kind Parley stores, posted within the hour.
      const mayStore = isStoredKind(message) &&
        Number(message.ts) * 1000 > Date.now() - EDIT_STORES_REPLY_WITHIN_MS &&
        await isAgent(installation, message.user, messageAuthorTeam(message), context);
      return { ...edit, reply: { ...reply, mayStore } };
    }
    if (event.subtype === "message_deleted") {
      // Removing the bot's copy of a visitor's message from Slack must not erase the visitor's
      // words: like edits, only deletions of members' own replies count (the deletion applies
      // to agents' messages alone, so an event without `previous_message`, as Slack's own
      // example shows it, is safe to apply).
      const previous = event.previous_message;
      if (previous && isOwn(installation, previous)) return null;
      return isSlackId(event.deleted_ts)
        ? { kind: "delete", channelId, ts: event.deleted_ts }
        : null;
    }
    if (!isStoredKind(event)) return null;
    if (isOwn(installation, event) || !isSlackId(event.user)) return null;
    // Another organisation's member in a shared channel is no agent: their reply changes nothing.
    if (!await isAgent(installation, event.user, messageAuthorTeam(event), context)) return null;
    const reply = await threadReplyOf(installation, channelId, event);
    if (!reply) return null;
    const text = storableText(await readable(installation, String(event.text ?? "")));
    if (text.trim() === "" && reply.files.length === 0) return null;
    return { kind: "reply", ...reply, text, internal: isNote(text), channelId, ts: event.ts };
  }

  /**
   * The conversation, sender and files of `message` when it is a person's reply in the thread of
   * a conversation the installation mirrors; null for anything else (the bot's own posts, a
   * thread's root, a message outside mirrored threads). Whether the person is an agent is the
   * caller's to judge.
   */
  async function threadReplyOf(
    installation: SlackInstallation,
    channelId: string,
    message: SlackDocument,
  ): Promise<{ chatId: number; senderName: string; files: SlackReplyFile[] } | null> {
    if (!message || isOwn(installation, message) || !isSlackId(message.user)) return null;
    if (!isSlackId(message.ts) || !isSlackId(message.thread_ts)) return null;
    if (message.thread_ts === message.ts) return null;
    const thread = await threadOf(installation, channelId, message.thread_ts);
    if (!thread) return null;
    const attached = Array.isArray(message.files)
      ? message.files.slice(0, MAX_SLACK_REPLY_FILES)
      : [];
    const files = attached.flatMap((file: SlackDocument) =>
      isSlackId(file?.id)
        ? [{
          id: file.id,
          url: deps.mediaLinks.link(installation.appId, file.id),
          filename: storableText(String(file.name ?? file.title ?? file.id)),
          mimeType: typeof file.mimetype === "string" ? storableText(file.mimetype) : null,
          image: typeof file.mimetype === "string" && file.mimetype.startsWith("image/"),
        }]
        : []
    );
    return {
      chatId: thread.chatId,
      senderName: await displayName(installation, message.user),
      files,
    };
  }

  /** What the actor is to do with event request `id`: null when the request changes nothing. */
  async function prepareEvent(id: number, body: SlackDocument): Promise<SlackEventCommand | null> {
    const installation = await installationOf(body?.team_id);
    if (!installation || body?.type !== "event_callback" || !isSlackId(body.event_id)) {
      return null;
    }
    return {
      kind: "slack.event",
      appId: installation.appId,
      teamId: installation.teamId,
      eventId: body.event_id,
      deliveryId: id,
      change: await changeOf(installation, body.event, {
        teamId: installation.teamId,
        enterpriseId: installation.enterpriseId ?? body.enterprise_id,
        externallyShared: body.is_ext_shared_channel,
      }),
    };
  }

  /** Hands a prepared event to its application's actor; the answer settles once applied. */
  async function submitEvent(
    id: number,
    command: SlackEventCommand | null,
    place: StreamPlace,
  ): Promise<void> {
    if (command === null) return await markSlackDeliveryProcessed(deps.sql, id);
    failIfFailed(await deps.ask(appActorKey(command.appId), { ...command, order: place }));
  }

  /**
   * The commands click request `payload` makes, in order: looked up as it arrives (like an
   * event), so that its hand-over to the actor is not overtaken by the requests behind it.
   */
  async function prepareAction(
    payload: SlackDocument,
  ): Promise<(CloseChatCommand | VisitorActionCommand)[]> {
    const teamId = payload?.team?.id ?? payload?.user?.team_id;
    const installation = isSlackId(teamId) ? await findInstallationByTeam(deps.sql, teamId) : null;
    if (!installation || payload?.type !== "block_actions" || !Array.isArray(payload.actions)) {
      return [];
    }
    // Another organisation's member in a shared channel is no agent: their clicks do nothing.
    // The workspace's organisation is the one stored at install: a click's may be its clicker's.
    const context: SlackRequestContext = {
      teamId: installation.teamId,
      enterpriseId: installation.enterpriseId,
      gridNamed: payload.enterprise != null || payload.user?.enterprise_id != null ||
        payload.team?.enterprise_id != null || payload.is_enterprise_install === true,
    };
    if (!await isAgent(installation, payload.user?.id, payload.user?.team_id, context)) return [];
    const appId = installation.appId;
    const commands: (CloseChatCommand | VisitorActionCommand)[] = [];
    for (const action of payload.actions) {
      const blockId = String(action?.block_id ?? "");
      const closing = action?.action_id === CLOSE_ACTION_ID ? parseChatBlockId(blockId) : null;
      if (closing !== null) {
        // The actor answers 404 for another application's conversation: nothing closes.
        commands.push({ kind: "chat.close", appId, chatId: closing });
        continue;
      }
      const clicked = parseSlackAction(blockId, String(action?.value ?? ""));
      if (!clicked) continue;
      const target = await findMessageConversation(deps.sql, appId, clicked.messageId);
      if (!target) continue;
      commands.push({
        kind: "visitor.action",
        appId,
        clientId: target.clientId,
        chatId: target.chatId,
        messageId: clicked.messageId,
        actionId: clicked.buttonId,
      });
    }
    return commands;
  }

  /**
   * Hands a click request's commands to the actor together, in order (awaited one by one, the
   * requests behind could pass the later ones), then marks it applied. Tried again, a command that
   * did commit changes nothing: a click is accepted once, a closed conversation stays closed.
   */
  async function submitAction(
    id: number,
    commands: (CloseChatCommand | VisitorActionCommand)[],
    place: StreamPlace,
  ): Promise<void> {
    const results = await Promise.all(
      commands.map((command) => deps.ask(appActorKey(command.appId), { ...command, order: place })),
    );
    results.forEach(failIfFailed);
    await markSlackDeliveryProcessed(deps.sql, id);
  }

  async function process(
    kind: "event" | "action",
    id: number,
    body: Uint8Array,
    document?: SlackDocument,
    earlier: readonly number[] = [],
  ) {
    const parsed: SlackDocument = document === undefined
      ? parseSlackRequest(kind, new TextDecoder().decode(body))
      : document;
    if (parsed === null) log("warn", "slack request is not JSON", { kind });
    // A workspace's requests are applied in the order they arrived — two replies typed in a
    // thread must reach the visitor in that order (see ordered_apply.ts). An event is prepared as
    // it arrives, so that the work is spread between the acknowledgements rather than done in
    // one burst when the window closes.
    const team = slackTeamOf(parsed);
    // The database not reached (in a lookup or in the actor) is a failure worth retrying.
    const retryable = (run: (place: StreamPlace) => Promise<void>): ApplyAttempt => (place) =>
      run(place).catch((error) => {
        throw asApplyFailure(error);
      });
    const failedPreparation = (error: unknown) => {
      throw asApplyFailure(error);
    };
    // It is handed over in its turn, once prepared: after another instance's earlier requests
    // of the workspace are applied (see earlier_deliveries.ts).
    const earlierApplied = () => earlierWaits.wait(team, earlier);
    const prepare = (): Promise<ApplyAttempt> =>
      kind === "event"
        ? Promise.all([prepareEvent(id, parsed), earlierApplied()]).then(
          ([command]) => retryable((place) => submitEvent(id, command, place)),
          failedPreparation,
        )
        : Promise.all([prepareAction(parsed), earlierApplied()]).then(
          ([commands]) => retryable((place) => submitAction(id, commands, place)),
          failedPreparation,
        );
    await applyCountingAttempts(order, {
      key: team,
      prepare,
      label: `Slack ${kind} ${id}`,
      recordAttempt: (failure) => recordSlackDeliveryFailure(deps.sql, id, failure),
    });
  }

  /** Live requests wait while the recovery at start hands over those stored before them. */
  const liveGate = createLiveGate({
    onExpired: () => log("warn", "live Slack requests no longer wait for the recovery at start"),
  });
  return {
    async process(kind, id, body, document, earlier) {
      await liveGate.pass(body.byteLength);
      await process(kind, id, body, document, earlier);
    },
    recover: (options) =>
      recoverStored(deps.sql, {
        find: findUnprocessedSlackDeliveries,
        apply: (delivery) =>
          process(delivery.kind, delivery.id, delivery.body).catch((error) =>
            log("error", "slack request recovery failed", describeError(error))
          ),
        liveGate,
      }, options),
    stop() {
      earlierWaits.stop();
      order.stop();
    },
  };
}

/**
 * Throws when the actor could not apply a command (a 500: retryable when the database was not
 * reached), so that the request stays unprocessed; its refusals (another application's
 * conversation, a button no longer offered) are final answers.
 */
function failIfFailed(result: CommandResult): void {
  if (result.ok || result.status < 500) return;
  throw result.retryable ? new RetryableApplyError(result.message) : new Error(result.message);
}

/** Whether a member's text is an internal note (CONTRACT §6.2: it starts with `note:`). */
function isNote(text: string): boolean {
  return /^\s*note:/i.test(text);
}

/**
 * How old a reply an edit may store, Parley lacking it, can be: Slack retries a failed delivery
 * for about an hour; an older reply Parley never had was not lost to a retry to come.
 */
const EDIT_STORES_REPLY_WITHIN_MS = 3_600_000;

/**
 * Whether a message event is of a kind that makes a reply: a plain message, a file share, or a
 * reply also sent to the channel.
 */
function isStoredKind(message: SlackDocument): boolean {
  const subtype = message?.subtype;
  return subtype === undefined || subtype === "file_share" || subtype === "thread_broadcast";
}
