/**
 * The Flow's part of a write batch: after the batch's own statements have shown which
 * conversations started and which clicks were accepted, the Flow's messages and closes are
 * stored in the same transaction, so a Flow step commits with the change that caused it or not
 * at all. Flow messages take the ordinary reply path (sender `flow`, `message.sent`).
 */
import type { Tx } from "./client.ts";
import { appendReplies, type ReplyInput } from "./replies.ts";
import { closeConversation } from "./conversations.ts";
import { advanceFlow, type Flow, type FlowStep, startFlow } from "../domain/flow.ts";

/** Why a Flow moves in a conversation: it started, or a click on a Flow message was accepted. */
export type FlowTrigger =
  | { kind: "start"; appId: number; chatId: number }
  | { kind: "click"; appId: number; chatId: number; node: string; buttonId: string };

/** What the Flow changed, for the batch's change notice. */
export interface FlowEffect {
  appId: number;
  messageId?: number;
  /** The conversation of `messageId`. */
  chatId?: number;
  /** A conversation the Flow closed. */
  chatChanged?: number;
  /** Webhook events queued. */
  queuedEvents?: number;
  /** A message edited or deleted (pushed to the visitor's sockets). */
  edited?: { chatId: number; messageId: number; deleted: boolean };
}

/**
 * Runs the Flow steps of `triggers` (in order) for the applications in `flows`; triggers of
 * applications without a Flow, and clicks the current Flow no longer maps, do nothing. All the
 * Flow messages of the batch go in one statement, then the closes.
 */
export async function runFlowSteps(
  sql: Tx,
  triggers: FlowTrigger[],
  flows: Map<number, Flow>,
): Promise<FlowEffect[]> {
  const replies: ReplyInput[] = [];
  const closes: { appId: number; chatId: number }[] = [];
  for (const trigger of triggers) {
    const flow = flows.get(trigger.appId);
    if (flow === undefined) continue;
    const step: FlowStep | null = trigger.kind === "start"
      ? startFlow(flow)
      : advanceFlow(flow, trigger.node, trigger.buttonId);
    if (step === null) continue;
    for (const send of step.sends) {
      replies.push({
        appId: trigger.appId,
        chatId: trigger.chatId,
        senderType: "flow",
        senderName: null,
        messageType: send.messageType,
        content: send.content,
        payload: send.payload,
        flowNode: send.node,
        // Outside WhatsApp's window the step is kept failed (`message.failed`), not dropped.
        keepOutsideWindow: true,
      });
    }
    if (step.stop === "close") closes.push({ appId: trigger.appId, chatId: trigger.chatId });
  }
  const effects: FlowEffect[] = [];
  if (replies.length > 0) {
    const { replies: stored, queuedEvents } = await appendReplies(sql, replies);
    effects.push({ appId: replies[0].appId, queuedEvents });
    stored.forEach((reply, index) => {
      if (reply.kind === "stored" || reply.kind === "failed") {
        effects.push({
          appId: replies[index].appId,
          messageId: reply.messageId,
          chatId: reply.chatId,
          chatChanged: reply.kind === "stored" && reply.reopened ? reply.chatId : undefined,
        });
      }
    });
  }
  const closed = await Promise.all(
    closes.map((close) => closeConversation(sql, close.appId, close.chatId)),
  );
  closed.forEach((result, index) => {
    if (result?.changed) {
      effects.push({
        appId: closes[index].appId,
        chatChanged: result.conversation.id,
        queuedEvents: result.queuedEvents,
      });
    }
  });
  return effects;
}
