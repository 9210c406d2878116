/**
 * Slack events inside the actors' write batch. Each is applied at most once (its `event_id` is
 * recorded in the same transaction); a thread reply is stored through the ordinary reply path
 * (so it reaches the visitor's socket, WhatsApp and webhooks like any agent message) with its
 * Slack `ts` remembered (so it is not mirrored back, nor stored twice); edits and deletions are
 * applied to the mirrored message; the stored deliveries are marked applied.
 *
 * Consecutive events of a batch are applied together: their event ids are claimed, their
 * messages looked up and their deliveries marked in one statement each, and a run of replies is
 * stored with one set-based statement and remembered with one more — a handful of statements
 * for the run instead of five per event.
 */
import { sentAhead } from "./sent_ahead.ts";
import type { Tx } from "./client.ts";
import { OUTSIDE_WINDOW, OUTSIDE_WINDOW_CODE } from "../domain/conversation.ts";
import type { SlackChange, SlackEventCommand } from "../actors/protocol.ts";
import type { FlowEffect } from "./flow_runs.ts";
import { type AppendedReply, appendReplies, type ReplyInput } from "./replies.ts";
import { recordChannelMedia, recordMediaMessages } from "./channel_media.ts";
import { saveMirroredMessages } from "./slack_sends.ts";
import { queueNotDelivered } from "./slack_mirror.ts";
import { hastenWithdrawnSends } from "./channel_sends.ts";
import {
  addedTextKey,
  claimSlackEvents,
  deleteSlackMessage,
  editSlackMessage,
  findKnownSlackMessages,
  hideSlackReplyFiles,
  isTextlessSlackReply,
  markSlackDeliveriesProcessed,
  slackEventKey,
  slackMessageKey,
  slackReplyKeys,
} from "./slack_inbound.ts";

type ReplyChange = Extract<SlackChange, { kind: "reply" }>;

/** A reply to store: the command it came from, its change and the messages it makes. */
interface PendingReply {
  command: number;
  appId: number;
  teamId: string;
  change: ReplyChange;
  inputs: ReplyInput[];
  /** The Slack file each of `inputs` carries (null for the text). */
  fileIds: (string | null)[];
}

/** The reply `change` of command `command` to store: see {@linkcode replyInputs}. */
function pendingReply(
  command: number,
  appId: number,
  teamId: string,
  change: ReplyChange,
): PendingReply {
  const parts = replyParts(appId, change);
  return {
    command,
    appId,
    teamId,
    change,
    inputs: parts.map((part) => part.input),
    fileIds: parts.map((part) => part.fileId),
  };
}

/** Applies consecutive Slack events in order; resolves to what each changed. */
export async function applySlackEvents(
  sql: Tx,
  commands: SlackEventCommand[],
): Promise<FlowEffect[][]> {
  const links = commands.flatMap((command) =>
    command.change?.kind === "reply" ? [{ teamId: command.teamId, ...command.change }] : []
  );
  const claiming = sentAhead(claimSlackEvents(sql, commands));
  const looking = sentAhead(findKnownSlackMessages(sql, links));
  const marked = sentAhead(
    markSlackDeliveriesProcessed(sql, commands.map((command) => command.deliveryId)),
  );
  const [claimed, known] = await Promise.all([claiming, looking]);

  const changes: FlowEffect[][] = commands.map(() => []);
  /** Steps in batch order: a run of replies, or one edit or deletion. */
  const steps: (PendingReply[] | (() => Promise<void>))[] = [];
  for (const [index, command] of commands.entries()) {
    const { appId, teamId, change } = command;
    // Only the first of an event id, and of a message, changes anything.
    if (!claimed.delete(slackEventKey(teamId, command.eventId)) || change === null) continue;
    if (change.kind === "reply") {
      const key = slackMessageKey({ teamId, ...change });
      if (known.has(key)) continue;
      known.add(key);
      const pending = pendingReply(index, appId, teamId, change);
      const last = steps.at(-1);
      if (Array.isArray(last)) last.push(pending);
      else steps.push([pending]);
    } else if (change.kind === "edit") {
      const mayStore = change.reply?.mayStore === true &&
        (change.text.trim() !== "" || change.reply.files.length > 0);
      // After it the reply is known: stored before, stored by it, or deleted.
      if (mayStore) known.add(slackMessageKey({ teamId, ...change }));
      steps.push(async () => {
        if (change.reply && mayStore && await isUnknownReply(sql, teamId, change)) {
          // Slack's retry of the reply is still to come (its first delivery failed): the reply
          // is stored as the edit makes it read, and the retry will find it known.
          const reply: ReplyChange = {
            kind: "reply",
            chatId: change.reply.chatId,
            senderName: change.reply.senderName,
            files: change.reply.files,
            text: change.text,
            internal: change.internal,
            channelId: change.channelId,
            ts: change.ts,
          };
          const pending = pendingReply(index, appId, teamId, reply);
          if (pending.inputs.length > 0) await storeReplies(sql, [pending], changes);
          return;
        }
        if (change.text.trim() === "") {
          // The text of a reply with files removed: its files stay.
          const removed = await deleteSlackMessage(sql, appId, {
            teamId,
            ...change,
            textOnly: true,
          });
          changes[index].push(...deletedChanges(appId, removed));
          return;
        }
        const edited = await editSlackMessage(sql, appId, { teamId, ...change });
        if (
          !edited && change.reply && change.reply.files.length > 0 &&
          await isTextlessSlackReply(sql, appId, { teamId, ...change })
        ) {
          const added: ReplyChange = {
            kind: "reply",
            chatId: change.reply.chatId,
            senderName: change.reply.senderName,
            text: change.text,
            internal: change.internal,
            files: [],
            channelId: change.channelId,
            ts: addedTextKey(change.ts),
          };
          await storeReplies(sql, [pendingReply(index, appId, teamId, added)], changes);
          // Text that makes a reply of files a note takes its files along.
          if (change.internal) await hideReplyFiles(sql, appId, teamId, change, changes[index]);
        }
        if (edited) {
          changes[index].push({
            appId,
            queuedEvents: edited.queuedEvents,
            // Made internal, it is gone for the visitor.
            edited: { chatId: edited.chatId, messageId: edited.messageId, deleted: edited.hidden },
          });
        }
        if (edited?.hidden) {
          // A reply made a note takes its files along.
          await hideReplyFiles(sql, appId, teamId, change, changes[index], [edited.messageId]);
        }
      });
    } else {
      // A reply that comes after its deletion stays deleted.
      known.add(slackMessageKey({ teamId, ...change }));
      steps.push(async () => {
        const deleted = await deleteSlackMessage(sql, appId, {
          teamId,
          channelId: change.channelId,
          ts: change.ts,
        });
        await hastenWithdrawnSends(sql, appId, deleted.map((one) => one.messageId));
        changes[index].push(...deletedChanges(appId, deleted));
      });
    }
  }
  // A step waits for the ones before it: an edit may name a reply stored just before.
  for (const step of steps) {
    if (Array.isArray(step)) await storeReplies(sql, step, changes);
    else await step();
  }
  await marked;
  return changes;
}

/** Whether Parley has not had the reply posted as (channel, ts), nor its deletion. */
async function isUnknownReply(
  sql: Tx,
  teamId: string,
  link: { channelId: string; ts: string },
): Promise<boolean> {
  return (await findKnownSlackMessages(sql, [{ teamId, ...link }])).size === 0;
}

/**
 * Makes the files of the reply `change` names internal, as its text was made a note (see
 * {@linkcode hideSlackReplyFiles}); their waiting sends, and those of `textIds`, are withdrawn at
 * once.
 */
async function hideReplyFiles(
  sql: Tx,
  appId: number,
  teamId: string,
  change: { channelId: string; ts: string },
  effects: FlowEffect[],
  textIds: number[] = [],
): Promise<void> {
  const files = await hideSlackReplyFiles(sql, appId, { teamId, ...change });
  await hastenWithdrawnSends(sql, appId, [
    ...textIds,
    ...files.hidden.map((one) => one.messageId),
  ]);
  effects.push(...files.hidden.map((one, at) => ({
    appId,
    queuedEvents: at === 0 ? files.queuedEvents : 0,
    edited: { chatId: one.chatId, messageId: one.messageId, deleted: true },
  })));
}

/**
 * What deleting these messages changed: a note was never the visitor's, so is not announced (its
 * effect only carries the events queued, if the first).
 */
function deletedChanges(
  appId: number,
  deleted: { messageId: number; chatId: number; internal: boolean; queuedEvents: number }[],
): FlowEffect[] {
  return deleted.map((one) =>
    one.internal ? { appId, queuedEvents: one.queuedEvents } : {
      appId,
      queuedEvents: one.queuedEvents,
      edited: { chatId: one.chatId, messageId: one.messageId, deleted: true },
    }
  );
}

/** The messages a Slack reply makes: its text (unless empty), then one per attached file. */
function replyInputs(appId: number, change: ReplyChange): ReplyInput[] {
  return replyParts(appId, change).map((part) => part.input);
}

/** {@linkcode replyInputs}, each with the Slack file it carries (null for the text). */
function replyParts(
  appId: number,
  change: ReplyChange,
): { input: ReplyInput; fileId: string | null }[] {
  const reply = (messageType: "text" | "image" | "file", content: string, payload: unknown) => ({
    appId,
    chatId: change.chatId,
    senderType: "agent" as const,
    senderName: change.senderName,
    messageType,
    content,
    payload,
    internal: change.internal,
  });
  const files = change.files.map((file) => {
    const document = { url: file.url, mime_type: file.mimeType, filename: file.filename };
    return {
      input: reply(file.image ? "image" : "file", JSON.stringify(document), document),
      fileId: file.id,
    };
  });
  const text = change.text.trim() === ""
    ? []
    : [{ input: reply("text", change.text, null), fileId: null }];
  return [...text, ...files];
}

/**
 * Stores a run of replies in one statement, records their files for the media proxy, and
 * remembers each stored message's Slack `ts` (the first message of a reply under the reply's
 * own, the others under `ts#n`).
 */
async function storeReplies(
  sql: Tx,
  run: PendingReply[],
  changes: FlowEffect[][],
): Promise<void> {
  const inputs = run.flatMap((pending) => pending.inputs);
  const stored = inputs.length > 0
    ? appendReplies(sql, inputs)
    : Promise.resolve({ replies: [], queuedEvents: 0 });
  const media = new Map<number, string[]>();
  for (const pending of run) {
    const ids = media.get(pending.appId) ?? [];
    ids.push(...pending.change.files.map((file) => file.id));
    media.set(pending.appId, ids);
  }
  const recorded = sentAhead(Promise.all(
    [...media].map(([appId, ids]) => recordChannelMedia(sql, "slack", appId, ids)),
  ));
  const { replies, queuedEvents } = await stored;
  await recorded;
  let queued = queuedEvents;
  let offset = 0;
  const links = [];
  const carried = [];
  const undelivered: { command: number; appId: number; messageIds: number[] }[] = [];
  for (const pending of run) {
    const own = replies.slice(offset, offset + pending.inputs.length);
    offset += pending.inputs.length;
    for (const [index, one] of own.entries()) {
      const mediaId = pending.fileIds[index];
      if (one.kind === "stored" && mediaId) {
        carried.push({ appId: pending.appId, mediaId, messageId: one.messageId });
      }
    }
    let kept = own.flatMap((one) => one.kind === "stored" ? [one] : []);
    if (kept.length === 0 && own.some((one) => one.kind === "outside_window")) {
      // WhatsApp's 24-hour window has closed: the reply is kept as a note saying so, rather
      // than lost, and its thread is told under it (a template can reopen the conversation).
      const note = await appendReplies(sql, [{
        ...replyInputs(pending.appId, pending.change)[0],
        messageType: "text",
        content: `[Not delivered: outside WhatsApp's 24-hour window] ${pending.change.text}`,
        payload: null,
        internal: true,
      }]);
      kept = note.replies.flatMap((one) => one.kind === "stored" ? [one] : []);
      queued += note.queuedEvents;
      undelivered.push({
        command: pending.command,
        appId: pending.appId,
        messageIds: kept.map((one) => one.messageId),
      });
    }
    for (const [index, one] of kept.entries()) {
      links.push({
        appId: pending.appId,
        messageId: one.messageId,
        teamId: pending.teamId,
        channelId: pending.change.channelId,
        ts: slackReplyKeys(pending.change.ts)[index],
      });
      changes[pending.command].push(storedChange(pending.appId, one, queued));
      queued = 0;
    }
  }
  await Promise.all([
    saveMirroredMessages(sql, links),
    recordMediaMessages(sql, "slack", carried),
  ]);
  // Once in their thread, its "Not delivered" line follows them there.
  for (const { command, appId, messageIds } of undelivered) {
    const queuedEvents = await failInThread(sql, appId, messageIds, {
      code: OUTSIDE_WINDOW_CODE,
      title: OUTSIDE_WINDOW,
    });
    changes[command].push({ appId, queuedEvents });
  }
}

/**
 * Marks the replies `messageIds`, in their Slack thread already, failed with `failure`, and
 * queues the post of their "Not delivered" line under them (`queueNotDelivered`); resolves to
 * the rows queued.
 */
async function failInThread(
  sql: Tx,
  appId: number,
  messageIds: number[],
  failure: { code: number; title: string },
): Promise<number> {
  if (messageIds.length === 0) return 0;
  const [row] = await sql<{ queued: number }[]>`
    WITH failed AS (
      UPDATE messages
      SET status = 'failed', failure_code = ${failure.code}, failure_title = ${failure.title}
      WHERE app_id = ${appId} AND id = ANY (${messageIds}::bigint[])
      RETURNING id, conversation_id
    ), mirror AS (
      ${queueNotDelivered(sql, appId, "failed")}
    )
    SELECT count(*)::int AS queued FROM mirror`;
  return row.queued;
}

function storedChange(
  appId: number,
  one: Extract<AppendedReply, { kind: "stored" }>,
  queuedEvents: number,
): FlowEffect {
  return {
    appId,
    messageId: one.messageId,
    chatId: one.chatId,
    chatChanged: one.reopened ? one.chatId : undefined,
    queuedEvents,
  };
}
