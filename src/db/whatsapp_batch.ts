/**
 * WhatsApp webhook deliveries inside the actors' write batch. A run of consecutive deliveries is
 * applied together: every run of customers' messages among their updates — across deliveries —
 * is one set-based statement, each click, change of a customer's ids and status receipt one
 * statement, all sent at once in the deliveries' order (the server runs them in that order, each
 * seeing the ones before), followed by the statement that marks the deliveries processed. So
 * deliveries are applied whole in one transaction, and a replay of one finds every wamid already
 * stored.
 */
import { sentAhead } from "./sent_ahead.ts";
import type { Tx } from "./client.ts";
import type { WhatsAppInboundCommand, WhatsAppInboundEntry } from "../actors/protocol.ts";
import type { FlowEffect, FlowTrigger } from "./flow_runs.ts";
import {
  addWhatsAppIdentities,
  applyWhatsAppStatus,
  markWhatsAppDeliveriesProcessed,
  type StoredInbound,
  storeWhatsAppClick,
  storeWhatsAppMessages,
  type WhatsAppMessageInput,
} from "./whatsapp_inbound.ts";

/** What a delivery changed, for the change notice and the Flow. */
export interface AppliedDelivery {
  /** Updates that changed something (duplicates and stale receipts do not). */
  applied: number;
  changes: FlowEffect[];
  flowTriggers: FlowTrigger[];
  /** What each update changed and means for the Flow, in the delivery's order. */
  updates: { changes: FlowEffect[]; flowTriggers: FlowTrigger[] }[];
}

type MessageEntry = Extract<WhatsAppInboundEntry, { kind: "message" }>;

/** What one update did, once its statement answered. */
interface UpdateResult {
  /** Whether it changed something (a duplicate or a stale receipt does not). */
  applied: boolean;
  changes: FlowEffect[];
  flowTriggers: FlowTrigger[];
}

const NOTHING: UpdateResult = { applied: false, changes: [], flowTriggers: [] };

/** Applies `commands` (consecutive deliveries) in order and marks them processed. */
export async function applyWhatsAppDeliveries(
  sql: Tx,
  commands: WhatsAppInboundCommand[],
): Promise<AppliedDelivery[]> {
  /** Per command, per update, what it did: filled in as the statements answer. */
  const updates: Promise<UpdateResult>[][] = commands.map(() => []);
  let run: { command: number; input: WhatsAppMessageInput }[] = [];
  const flushRun = () => {
    if (run.length === 0) return;
    const entries = run;
    run = [];
    const stored = storeWhatsAppMessages(sql, entries.map((entry) => entry.input));
    entries.forEach((entry, index) => {
      updates[entry.command].push(stored.then((result) => {
        const message = result.stored[index];
        // The run's queued events are counted once, on its first update.
        const queued = index === 0 ? result.queuedEvents : 0;
        if (!message) {
          return queued > 0
            ? { ...NOTHING, changes: [{ appId: entry.input.appId, queuedEvents: queued }] }
            : NOTHING;
        }
        return storedResult(entry.input.appId, message, queued);
      }));
    });
  };
  commands.forEach((command, index) => {
    const { appId } = command;
    for (const entry of command.entries) {
      if (entry.kind === "message") {
        run.push({ command: index, input: { ...entry, appId } });
        continue;
      }
      flushRun();
      updates[index].push(
        entry.kind === "click"
          ? applyClick(sql, appId, entry)
          : entry.kind === "identity"
          ? applyIdentity(sql, appId, entry)
          : applyStatus(sql, appId, entry),
      );
    }
  });
  flushRun();
  // A delivery's first part leaves the mark to the part that completes it.
  const whole = commands.filter((command) => !command.partial);
  const marked = whole.length === 0 ? null : sentAhead(markWhatsAppDeliveriesProcessed(
    sql,
    whole.map((command) => ({ appId: command.appId, deliveryId: command.deliveryId })),
  ));
  const results = await Promise.all(updates.map((ofCommand) => Promise.all(ofCommand)));
  await marked;
  return results.map((ofCommand) => ({
    applied: ofCommand.filter((result) => result.applied).length,
    changes: ofCommand.flatMap((result) => result.changes),
    flowTriggers: ofCommand.flatMap((result) => result.flowTriggers),
    updates: ofCommand,
  }));
}

/** The change and Flow trigger of a customer's message stored. */
function storedResult(appId: number, stored: StoredInbound, queuedEvents: number): UpdateResult {
  return {
    applied: true,
    changes: [{
      appId,
      messageId: stored.messageId,
      chatId: stored.chatId,
      chatChanged: stored.started ? stored.chatId : undefined,
      queuedEvents,
    }],
    flowTriggers: stored.started ? [{ kind: "start", appId, chatId: stored.chatId }] : [],
  };
}

async function applyClick(
  sql: Tx,
  appId: number,
  entry: Extract<WhatsAppInboundEntry, { kind: "click" }>,
): Promise<UpdateResult> {
  const stored = await storeWhatsAppClick(sql, appId, entry);
  if (!stored) {
    // A duplicate, or its conversation closed meanwhile: as plain text it opens a new one (and
    // a duplicate's wamid keeps it a no-op).
    const text: MessageEntry = {
      kind: "message",
      waId: entry.waId,
      userId: entry.userId,
      name: entry.name,
      wamid: entry.wamid,
      timestamp: entry.timestamp,
      messageType: "text",
      content: entry.title,
      payload: null,
    };
    const result = await storeWhatsAppMessages(sql, [{ ...text, appId }]);
    const message = result.stored[0];
    return message ? storedResult(appId, message, result.queuedEvents) : NOTHING;
  }
  return {
    applied: true,
    changes: [{
      appId,
      messageId: stored.messageId,
      chatId: entry.chatId,
      queuedEvents: stored.queuedEvents,
    }],
    flowTriggers: stored.accepted && stored.flowNode !== null
      ? [{
        kind: "click",
        appId,
        chatId: entry.chatId,
        node: stored.flowNode,
        buttonId: entry.actionId,
      }]
      : [],
  };
}

async function applyIdentity(
  sql: Tx,
  appId: number,
  entry: Extract<WhatsAppInboundEntry, { kind: "identity" }>,
): Promise<UpdateResult> {
  const added = await addWhatsAppIdentities(sql, appId, entry);
  return added > 0 ? { applied: true, changes: [], flowTriggers: [] } : NOTHING;
}

async function applyStatus(
  sql: Tx,
  appId: number,
  entry: Extract<WhatsAppInboundEntry, { kind: "status" }>,
): Promise<UpdateResult> {
  const applied = await applyWhatsAppStatus(sql, appId, entry);
  return applied
    ? { applied: true, changes: [{ appId, queuedEvents: applied.queuedEvents }], flowTriggers: [] }
    : NOTHING;
}
