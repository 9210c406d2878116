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
      const { replies, queuedEvents } = await appendReplies(sql, [{
        appId,
        chatId: change.chatId,
        senderType: "agent",
        senderName: change.senderName,
        messageType: "text",
        content: change.text,
        payload: null,
        internal: change.internal,
      }]);
      const [reply] = replies;
      if (reply.kind === "stored") {
        await saveMirroredMessage(sql, { appId, messageId: reply.messageId, ...link });
        changes.push({
          appId,
          messageId: reply.messageId,
          chatId: reply.chatId,
          chatChanged: reply.reopened ? reply.chatId : undefined,
          queuedEvents,
        });
      }
    }
  } else if (fresh && change?.kind === "edit") {
    const edited = await editSlackMessage(sql, appId, { teamId, ...change });
    if (edited) changes.push({ appId, queuedEvents: edited.queuedEvents });
  } else if (fresh && change?.kind === "delete") {
    await deleteSlackMessage(sql, appId, { teamId, channelId: change.channelId, ts: change.ts });
  }
  await markSlackDeliveryProcessed(sql, command.deliveryId);
  return changes;
}
