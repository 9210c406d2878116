/**
 * What happens to a WhatsApp webhook delivery after its 200 (CONTRACT §6.1): the stored raw
 * body is parsed into updates, updates for another business number are left out, media get a
 * signed proxy link, clicks are resolved to the Parley message and button they name (a click
 * that names nothing Parley can find becomes the customer's text), and the whole delivery goes
 * to the application's actor as one command, applied in one transaction, in the order they
 * arrived (one whose apply failed while the database was unreachable is retried before those
 * behind it). Deliveries left unprocessed by a crash are picked up again by
 * {@linkcode WhatsAppInboundProcessor.recover}.
 */
import { parseJsonBytes, storableText } from "../../domain/json_document.ts";
import type { Sql } from "../../db/client.ts";
import { appActorKey, type AppCommand, type CommandResult } from "../../actors/protocol.ts";
import type { WhatsAppInboundEntry } from "../../actors/protocol.ts";
import type { AdReferral } from "../../domain/ad_referral.ts";
import {
  findClickTargets,
  findWaitingWhatsAppDeliveries,
  recordWhatsAppDeliveryFailure,
} from "../../db/whatsapp_inbound.ts";
import { findWhatsAppChannel } from "../../db/whatsapp_channels.ts";
import { buttonIdOfReply } from "../../domain/whatsapp_messages.ts";
import { buttonsOffered, isMessageType, type MessageType } from "../../domain/message_kinds.ts";
import { describeError, log } from "../../log.ts";
import { type InboundItem, parseWhatsAppWebhook } from "./inbound.ts";
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
import { findUnprocessedWhatsAppDeliveries } from "../../db/stored_requests.ts";
import { createLiveGate, recoverStored, type RecoveryOptions } from "../recover_stored.ts";
import { createEarlierWaits } from "../earlier_deliveries.ts";

/** What the processor needs. */
export interface WhatsAppInboundDeps {
  sql: Sql;
  ask(key: string, command: AppCommand): Promise<CommandResult>;
  mediaLinks: MediaLinks;
  /** How long deliveries wait to be applied together (see apply_window.ts). @default APPLY_WINDOW_MS */
  applyWindowMs?: number;
  /** How a delivery that failed for a reason that may pass is retried (tests shorten it). */
  retry?: Pick<OrderedApplyOptions, "retryDelaysMs" | "retryWithinMs">;
  /**
   * How long a wait for another instance's earlier deliveries goes on while none of them is
   * applied. @default EARLIER_WAIT_MS
   */
  earlierWaitMs?: number;
}

/** What the caller of {@linkcode WhatsAppInboundProcessor.process} may know already. */
export interface ProcessOptions {
  /** The channel's number (else it is looked up). */
  phoneNumberId?: string;
  /** The body parsed as JSON (else it is parsed; undefined when it is not JSON). */
  document?: unknown;
  /**
   * Deliveries another instance stored before it (see `earlier_deliveries.ts`): it is applied
   * once they are (or once none of them was for `EARLIER_WAIT_MS`).
   */
  earlier?: readonly number[];
}

/** The processor. */
export interface WhatsAppInboundProcessor {
  /** Applies stored delivery `deliveryId` of application `appId`, whose raw body is `body`. */
  process(
    appId: number,
    deliveryId: number,
    body: Uint8Array,
    options?: ProcessOptions,
  ): Promise<void>;
  /**
   * Applies the deliveries a crash left unprocessed (received over a minute ago, unless
   * `olderThanSeconds` says otherwise); resolves to their count.
   */
  recover(options?: RecoveryOptions): Promise<number>;
  /** Stops retrying failed deliveries (at shutdown): recovery applies them after the restart. */
  stop(): void;
}

/** Creates the processor. */
export function createWhatsAppInboundProcessor(
  deps: WhatsAppInboundDeps,
): WhatsAppInboundProcessor {
  /** Per application, deliveries are applied in the order they arrived (see ordered_apply.ts). */
  const order = createOrderedApply({
    name: "whatsapp",
    windowMs: deps.applyWindowMs ?? APPLY_WINDOW_MS,
    ...deps.retry,
  });
  const earlierWaits = createEarlierWaits<number>(
    (appId, ids) => findWaitingWhatsAppDeliveries(deps.sql, appId, ids),
    {
      patienceMs: deps.earlierWaitMs,
      onGaveUp: (key, left) =>
        log("warn", "whatsapp delivery applied before another instance's earlier ones", {
          app_id: key,
          count: left.length,
        }),
    },
  );
  async function entriesOf(
    appId: number,
    body: Uint8Array,
    known: ProcessOptions,
  ): Promise<WhatsAppInboundEntry[]> {
    const document = "document" in known ? known.document : parseJsonBytes(body);
    if (document === undefined) {
      log("warn", "whatsapp delivery is not JSON", { app_id: appId });
      return [];
    }
    const parsed = parseWhatsAppWebhook(document);
    for (const skipped of parsed.skipped) {
      log("warn", "whatsapp update skipped", { app_id: appId, ...skipped });
    }
    const number = known.phoneNumberId ??
      (await findWhatsAppChannel(deps.sql, appId))?.phoneNumberId;
    const ours = parsed.items.filter((item) => item.phoneNumberId === number);
    if (ours.length < parsed.items.length) {
      log("warn", "whatsapp updates for another number skipped", {
        app_id: appId,
        count: parsed.items.length - ours.length,
      });
    }
    const contexts = ours.flatMap((item) =>
      item.kind === "click" && item.contextWamid !== null ? [item.contextWamid] : []
    );
    const targets = new Map(
      (await findClickTargets(deps.sql, appId, contexts)).map((target) => [target.wamid, target]),
    );
    return ours.map((item) => entryOf(appId, item, targets));
  }

  function entryOf(
    appId: number,
    item: InboundItem,
    targets: Map<string, Awaited<ReturnType<typeof findClickTargets>>[number]>,
  ): WhatsAppInboundEntry {
    if (item.kind === "status") {
      return {
        kind: "status",
        wamid: item.wamid,
        status: item.status,
        timestamp: item.timestamp,
        error: item.error,
      };
    }
    if (item.kind === "identity") {
      log("info", "whatsapp customer changed their number or user id", { app_id: appId });
      const { wamid, timestamp, newWaId, newUserId, customer: { waId, userId } } = item;
      return { kind: "identity", wamid, timestamp, waId, userId, newWaId, newUserId };
    }
    const { waId, userId } = item.customer;
    const who = { waId, userId, name: storable(item.customer.name) };
    if (item.kind === "click") {
      const target = item.contextWamid === null ? undefined : targets.get(item.contextWamid);
      const sameCustomer = target !== undefined &&
        (waId !== null && target.waIds.includes(waId) ||
          userId !== null && target.userIds.includes(userId));
      const actionId = target && target.chatOpen && sameCustomer &&
          isMessageType(target.messageType)
        ? replyButtonId(target.messageType, target.payload, item.replyId)
        : null;
      if (target && actionId !== null) {
        return {
          kind: "click",
          ...who,
          wamid: item.wamid,
          timestamp: item.timestamp,
          chatId: target.chatId,
          messageId: target.messageId,
          actionId,
          title: buttonTitle(target.messageType, target.payload, actionId) ??
            storable(item.title) ?? "",
        };
      }
      return textEntry(item, item.title);
    }
    const { content, replyToWamid, referral } = item;
    if (content.messageType === "text") {
      return textEntry(item, content.text, replyToWamid, referral);
    }
    const payload: Record<string, unknown> = {
      url: deps.mediaLinks.link(appId, content.media.id),
      mime_type: storable(content.media.mimeType),
      ...(content.media.caption === null ? {} : { caption: storable(content.media.caption) }),
      ...(content.media.filename === null ? {} : { filename: storable(content.media.filename) }),
    };
    return {
      kind: "message",
      ...who,
      wamid: item.wamid,
      timestamp: item.timestamp,
      messageType: content.messageType,
      content: JSON.stringify(payload),
      payload,
      mediaId: content.media.id,
      replyToWamid,
      referral,
    };
  }

  async function process(
    appId: number,
    deliveryId: number,
    body: Uint8Array,
    options: ProcessOptions = {},
  ): Promise<void> {
    // Each delivery is prepared (parsed, its clicks looked up) as it arrives, so that the work is
    // spread between the acknowledgements rather than done in one burst when the window closes;
    // the actor checks again what a click may change. It is handed over in its turn, once
    // prepared: after another instance's earlier deliveries are applied.
    const prepare = (): Promise<ApplyAttempt> =>
      Promise.all([
        entriesOf(appId, body, options),
        earlierWaits.wait(appId, options.earlier ?? []),
      ]).then(([entries]) => async (place) => {
        const result = await deps.ask(appActorKey(appId), {
          kind: "whatsapp.inbound",
          appId,
          deliveryId,
          entries,
          order: place,
        });
        if (result.ok) return;
        throw result.retryable
          ? new RetryableApplyError(result.message)
          : new Error(result.message);
      }, (error) => {
        throw asApplyFailure(error);
      });
    await applyCountingAttempts(order, {
      key: String(appId),
      prepare,
      label: `WhatsApp delivery ${deliveryId}`,
      recordAttempt: (failure) =>
        recordWhatsAppDeliveryFailure(deps.sql, appId, deliveryId, failure),
    });
  }

  /** Live deliveries wait while the recovery at start hands over those stored before them. */
  const liveGate = createLiveGate({
    onExpired: () =>
      log("warn", "live WhatsApp deliveries no longer wait for the recovery at start"),
  });
  return {
    async process(appId, deliveryId, body, options) {
      await liveGate.pass(body.byteLength);
      await process(appId, deliveryId, body, options);
    },
    recover: (options) =>
      recoverStored(deps.sql, {
        find: findUnprocessedWhatsAppDeliveries,
        apply: (delivery) =>
          process(delivery.appId, delivery.id, delivery.body).catch((error) =>
            log("error", "whatsapp delivery recovery failed", describeError(error))
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
 * The Parley button a reply names: an interactive reply's id as the renderer sent it, or a
 * template quick reply's payload, which is the button's id itself.
 */
function replyButtonId(messageType: MessageType, payload: unknown, replyId: string): string | null {
  if (messageType === "template") {
    return buttonsOffered(messageType, payload).some((button) => button.id === replyId)
      ? replyId
      : null;
  }
  return buttonIdOfReply(messageType, payload, replyId);
}

/**
 * The title of the Parley button `actionId` as it was written: WhatsApp sends back the title it
 * showed, which may be cut short (a list row's title holds 24 characters). Null for a template's
 * quick reply, whose text only the template knows (the customer's reply carries it).
 */
function buttonTitle(messageType: string, payload: unknown, actionId: string): string | null {
  if (messageType === "template") return null;
  return buttonsOffered(messageType, payload).find((button) => button.id === actionId)?.title ??
    null;
}

/**
 * A customer's text as a message entry, with the ad it came from if any; a click that names no
 * button Parley can find quotes nothing (`replyToWamid` null): its context is the message
 * clicked in, not a reply.
 */
function textEntry(
  item: Extract<InboundItem, { kind: "message" | "click" }>,
  text: string,
  replyToWamid: string | null = null,
  referral: AdReferral | null = null,
): WhatsAppInboundEntry {
  return {
    kind: "message",
    waId: item.customer.waId,
    userId: item.customer.userId,
    name: storable(item.customer.name),
    wamid: item.wamid,
    timestamp: item.timestamp,
    messageType: "text",
    content: storable(text) || "(empty message)",
    payload: null,
    replyToWamid,
    referral,
  };
}

/** Customer text, or its absence, as PostgreSQL can store it (see `storableText`). */
function storable<T extends string | null>(text: T): T {
  return (text === null ? null : storableText(text)) as T;
}
