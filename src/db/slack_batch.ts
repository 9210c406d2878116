/**
 * A Slack event inside the actors' write batch: applied at most once (its `event_id` is recorded
 * in the same transaction), a thread reply stored through the ordinary reply path (so it reaches
 * the visitor's socket, WhatsApp and webhooks like any agent message) with its Slack `ts`
 * remembered (so it is not mirrored back), edits and deletions applied to the mirrored message,
 * and the stored delivery marked applied.
 */
import type { Tx } from "./client.ts";
import type { SlackEventCommand } from "../actors/protocol.ts";
import type { FlowEffect } from "./flow_runs.ts";
import { appendReplies } from "./replies.ts";
import { recordChannelMedia } from "./channel_media.ts";
import { saveMirroredMessage } from "./slack_sends.ts";
import {
  claimSlackEvent,
  deleteSlackMessage,
  editSlackMessage,
  isSlackMessageKnown,
  markSlackDeliveryProcessed,
} from "./slack_inbound.ts";

/** Applies a Slack event; resolves to what it changed (for the change notice). */
export async function applySlackEvent(sql: Tx, command: SlackEventCommand): Promise<FlowEffect[]> {
  const { appId, teamId, change } = command;
  const changes: FlowEffect[] = [];
  const fresh = await claimSlackEvent(sql, teamId, command.eventId);
  if (fresh && change?.kind === "reply") {
    const link = { teamId, channelId: change.channelId, ts: change.ts };
    if (!(await isSlackMessageKnown(sql, link))) {
      const reply = (
        messageType: "text" | "image" | "file",
        content: string,
        payload: unknown,
      ) => ({
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
        return reply(file.image ? "image" : "file", JSON.stringify(document), document);
      });
      const { replies, queuedEvents } = await appendReplies(sql, [
        ...(change.text.trim() === "" ? [] : [reply("text", change.text, null)]),
        ...files,
      ]);
      await recordChannelMedia(sql, "slack", appId, change.files.map((file) => file.id));
      let stored = replies.flatMap((one) => one.kind === "stored" ? [one] : []);
      if (stored.length === 0 && replies.some((one) => one.kind === "outside_window")) {
        // WhatsApp's 24-hour window has closed: the reply is kept as a note saying so, rather
        // than lost (the agent sees it in the thread; a template can reopen the conversation).
        const kept = await appendReplies(sql, [{
          ...reply(
            "text",
            `[Not delivered: outside WhatsApp's 24-hour window] ${change.text}`,
            null,
          ),
          internal: true,
        }]);
        stored = kept.replies.flatMap((one) => one.kind === "stored" ? [one] : []);
      }
      // The Slack message is the first stored one: the others are mirrored as it is, too.
      for (const [index, one] of stored.entries()) {
        if (index === 0) {
          await saveMirroredMessage(sql, { appId, messageId: one.messageId, ...link });
        } else {await saveMirroredMessage(sql, {
            appId,
            messageId: one.messageId,
            ...link,
            ts: `${link.ts}#${index}`,
          });}
        changes.push({
          appId,
          messageId: one.messageId,
          chatId: one.chatId,
          chatChanged: one.reopened ? one.chatId : undefined,
          queuedEvents: index === 0 ? queuedEvents : 0,
        });
      }
    }
  } else if (fresh && change?.kind === "edit") {
    const edited = await editSlackMessage(sql, appId, { teamId, ...change });
    if (edited) {
      changes.push({
        appId,
        queuedEvents: edited.queuedEvents,
        edited: { chatId: edited.chatId, messageId: edited.messageId, deleted: false },
      });
    }
  } else if (fresh && change?.kind === "delete") {
    const deleted = await deleteSlackMessage(sql, appId, {
      teamId,
      channelId: change.channelId,
      ts: change.ts,
    });
    if (deleted) {
      changes.push({
        appId,
        edited: { chatId: deleted.chatId, messageId: deleted.messageId, deleted: true },
      });
    }
  }
  await markSlackDeliveryProcessed(sql, command.deliveryId);
  return changes;
}
