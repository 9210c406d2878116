/**
 * Sends one claimed message to WhatsApp (CONTRACT §6.1): renders it with the WhatsApp renderer
 * (one Parley message may become several WhatsApp messages), posts the parts not yet sent, in
 * order, remembering each wamid as it goes, and decides what a failure means — retry later on
 * rate limits and server errors (never sooner than `Retry-After`), fail the message for good on
 * any other refusal (CONTRACT §6.1: 4xx are not retried) — and when Meta refused the token
 * itself, flag the channel as well. A free-form message whose 24-hour window closed while it
 * waited is failed without a call (Meta would refuse it: 131047).
 */
import type { ClaimedSend, SendOutcome } from "../../db/channel_sends.ts";
import { nextSendRetryDelayMs } from "../../domain/channel_send_schedule.ts";
import { renderWhatsAppMessages } from "../../domain/whatsapp_messages.ts";
import { type GraphFailure, sendWhatsAppMessage } from "./graph_client.ts";
import { log } from "../../log.ts";
import { OUTSIDE_WINDOW, OUTSIDE_WINDOW_CODE } from "../../domain/conversation.ts";

/** Meta's error codes worth retrying: throughput and pair rate limits, temporary errors. */
const RETRIED_CODES = new Set([4, 80007, 130429, 131000, 131016, 131056, 133004]);

/** What a send needs from the outside world. */
export interface SenderDeps {
  graphUrl: string;
  openSecret(sealed: string): string;
  /** Records part `part` as sent, under `wamid` (null: accepted, its id unknown). */
  recordPart(send: ClaimedSend, part: number, wamid: string | null): Promise<void>;
  recordOutcome(send: ClaimedSend, outcome: SendOutcome): Promise<void>;
  /** Flags the application's channel: its access token was refused. */
  markAttention(appId: number, reason: string): Promise<void>;
  /** @default Math.random */
  random?: () => number;
}

/**
 * What a failure means: retry later, fail the message ("fail"), or fail it and flag the channel
 * ("attention": Meta refused the access token).
 */
export function judgeGraphFailure(failure: GraphFailure): "retry" | "attention" | "fail" {
  if (failure.code === 190 || failure.status === 401) return "attention";
  if (failure.status === 0 || failure.status === 429 || failure.status >= 500) return "retry";
  if (failure.code !== null && RETRIED_CODES.has(failure.code)) return "retry";
  return "fail";
}

function describe(failure: GraphFailure): string {
  const code = failure.code === null ? "" : ` (code ${failure.code})`;
  return `WhatsApp: ${failure.message}${code}`;
}

/** Sends `send` and records how it went. */
export async function sendToWhatsApp(deps: SenderDeps, send: ClaimedSend): Promise<void> {
  const record = (outcome: SendOutcome) => deps.recordOutcome(send, outcome);
  if (!send.message) {
    return record({ state: "failed", error: "the message no longer exists", code: null });
  }
  if (send.message.withdrawn) {
    return record({ state: "withdrawn", partSent: send.sentParts > 0 });
  }
  if (!send.channel) {
    return record({ state: "failed", error: "WhatsApp is not configured", code: null });
  }
  if (!send.recipient) {
    return record({ state: "failed", error: "the customer has no WhatsApp id", code: null });
  }
  const parts = renderWhatsAppMessages({
    message_type: send.message.messageType,
    content: send.message.content,
    payload: send.message.payload,
  });
  // Checked when the message was accepted and again now: a retry may come after the window
  // closed, which Meta would refuse (131047). A message all sent already (its outcome not
  // recorded before the claim lapsed) is sent, whatever the window is now.
  const unsent = send.sentParts < parts.length;
  if (unsent && send.message.messageType !== "template" && !send.windowOpen) {
    return record({ state: "failed", error: OUTSIDE_WINDOW, code: OUTSIDE_WINDOW_CODE });
  }
  const access = {
    graphUrl: deps.graphUrl,
    accessToken: deps.openSecret(send.channel.accessTokenSealed),
  };
  for (let part = send.sentParts; part < parts.length; part++) {
    const result = await sendWhatsAppMessage(
      access,
      send.channel.phoneNumberId,
      send.recipient,
      parts[part],
    );
    if (result.ok) {
      if (result.wamid === null) {
        log(
          "warn",
          "WhatsApp accepted a message without naming it: its receipts cannot be matched",
          {
            app_id: send.appId,
            message_id: send.message.id,
            part,
          },
        );
      }
      await deps.recordPart(send, part, result.wamid);
      continue;
    }
    const { failure } = result;
    const verdict = judgeGraphFailure(failure);
    if (verdict === "attention") await deps.markAttention(send.appId, describe(failure));
    // A failed message keeps Meta's own words as its error's title (its code beside them).
    if (verdict !== "retry") {
      return record({ state: "failed", error: failure.message, code: failure.code });
    }
    const retryInMs = nextSendRetryDelayMs(send.attempts + 1, {
      retryAfterMs: failure.retryAfterMs,
      random: (deps.random ?? Math.random)(),
    });
    return retryInMs === null
      ? record({ state: "failed", error: failure.message, code: failure.code })
      : record({ state: "retry", retryInMs, error: describe(failure) });
  }
  return record({ state: "sent" });
}
