/**
 * A WhatsApp webhook delivery inside the actors' write batch: every update's statement is sent
 * at once, in the delivery's order (the server runs them in that order, each seeing the ones
 * before), followed by the statement that marks the delivery processed — so a delivery is
 * applied whole in one transaction, and a replay of it finds every wamid already stored.
 */
import type { Tx } from "./client.ts";
import type { WhatsAppInboundCommand } from "../actors/protocol.ts";
import type { FlowEffect, FlowTrigger } from "./flow_runs.ts";
import { recordChannelMedia } from "./channel_media.ts";
import {
  applyWhatsAppStatus,
  markWhatsAppDeliveryProcessed,
  type StoredInbound,
  storeWhatsAppClick,
  storeWhatsAppMessage,
} from "./whatsapp_inbound.ts";

/** What a delivery changed, for the change notice and the Flow. */
export interface AppliedDelivery {
  /** Updates that changed something (duplicates and stale receipts do not). */
  applied: number;
  changes: FlowEffect[];
  flowTriggers: FlowTrigger[];
}

/** Applies a WhatsApp delivery's updates in order and marks it processed. */
export async function applyWhatsAppDelivery(
  sql: Tx,
  command: WhatsAppInboundCommand,
): Promise<AppliedDelivery> {
  const { appId } = command;
  const changes: FlowEffect[] = [];
  const flowTriggers: FlowTrigger[] = [];
  /** A customer's message stored: for the notice, and the Flow when it opened the conversation. */
  const noteStored = (stored: StoredInbound) => {
    changes.push({
      appId,
      messageId: stored.messageId,
      chatId: stored.chatId,
      chatChanged: stored.started ? stored.chatId : undefined,
      queuedEvents: stored.queuedEvents,
    });
    if (stored.started) flowTriggers.push({ kind: "start", appId, chatId: stored.chatId });
  };
  const steps = command.entries.map(async (entry): Promise<boolean> => {
    switch (entry.kind) {
      case "message": {
        const stored = await storeWhatsAppMessage(sql, appId, entry);
        if (!stored) return false;
        if (entry.mediaId) await recordChannelMedia(sql, "whatsapp", appId, [entry.mediaId]);
        noteStored(stored);
        return true;
      }
      case "click": {
        const stored = await storeWhatsAppClick(sql, appId, entry);
        if (!stored) {
          // A duplicate, or its conversation closed meanwhile: as plain text it opens a new one
          // (and a duplicate's wamid keeps it a no-op).
          const text = await storeWhatsAppMessage(sql, appId, {
            kind: "message",
            waId: entry.waId,
            name: entry.name,
            wamid: entry.wamid,
            timestamp: entry.timestamp,
            messageType: "text",
            content: entry.title,
            payload: null,
          });
          if (!text) return false;
          noteStored(text);
          return true;
        }
        changes.push({
          appId,
          messageId: stored.messageId,
          chatId: entry.chatId,
          queuedEvents: stored.queuedEvents,
        });
        if (stored.accepted && stored.flowNode !== null) {
          flowTriggers.push({
            kind: "click",
            appId,
            chatId: entry.chatId,
            node: stored.flowNode,
            buttonId: entry.actionId,
          });
        }
        return true;
      }
      case "status": {
        const applied = await applyWhatsAppStatus(sql, appId, entry);
        if (applied) changes.push({ appId, queuedEvents: applied.queuedEvents });
        return applied !== null;
      }
    }
  });
  const marked = markWhatsAppDeliveryProcessed(sql, appId, command.deliveryId);
  const results = await Promise.all(steps);
  await marked;
  // Triggers in delivery order: the statements resolve in order, so pushes already are.
  return { applied: results.filter(Boolean).length, changes, flowTriggers };
}
