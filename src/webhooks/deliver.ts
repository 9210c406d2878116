/**
 * One attempt of one webhook delivery (CONTRACT §5.2), from a claimed outbox row to its recorded
 * outcome: it reads the configuration in force now (a disabled or unsubscribed webhook cancels
 * the delivery), checks the url again with the SSRF guard, builds and signs the body, posts it
 * to the address that was checked, and records the attempt with the next state — succeeded on
 * any 2xx, a retry on the schedule otherwise (a redirect is a failure), failed when attempts run
 * out.
 */
import {
  type AttemptOutcome,
  type AttemptRecord,
  type ClaimedDelivery,
  type RecordedAttempt,
} from "../db/deliveries.ts";
import type { SecretBox } from "../crypto/secret_box.ts";
import { sha256Hex } from "../crypto/tokens.ts";
import { nextRetryDelayMs, parseRetryAfter } from "../domain/delivery_schedule.ts";
import { UNSUBSCRIBED_CANCELLATION } from "../domain/webhook_config.ts";
import type { CheckedUrl } from "./ssrf_guard.ts";
import { UnsafeUrlError } from "./ssrf_guard.ts";
import type { PinnedRequest, PinnedResponse } from "./pinned_https.ts";
import { signatureHeaders } from "./signature.ts";
import { log } from "../log.ts";

/** How long a receiver has to answer. */
export const DELIVERY_TIMEOUT_MS = 10_000;

/** What an attempt needs from the outside world. */
export interface DeliverDeps {
  /** Stores an attempt and the delivery's next state. */
  record(record: RecordedAttempt): Promise<void>;
  secretBox: SecretBox;
  /** The SSRF guard: the url with the addresses it may go to, or an `UnsafeUrlError`. */
  checkUrl(url: string): Promise<CheckedUrl>;
  /** Posts to a checked address. */
  post(request: PinnedRequest): Promise<PinnedResponse>;
  /** Extra trusted roots (WEBHOOK_CA_FILE). */
  caCerts?: string[];
  /** @default Date.now */
  now?: () => number;
  /** @default Math.random */
  random?: () => number;
}

/** PostgreSQL text cannot hold NUL; a receiver's answer may. */
function storable(attempt: AttemptRecord): AttemptRecord {
  const clean = (text: string | null) => text?.replaceAll("\u0000", "\uFFFD") ?? null;
  return {
    ...attempt,
    error: clean(attempt.error),
    responseExcerpt: clean(attempt.responseExcerpt),
  };
}

/** The event id of a delivery: `evt_` + hex, the same on every attempt. */
export function eventIdOf(delivery: { appId: number; id: number }): string {
  return `evt_${sha256Hex(`${delivery.appId}:${delivery.id}`).slice(0, 24)}`;
}

/** Makes one attempt of `delivery` and records it; resolves to what follows. */
export async function attemptDelivery(
  deps: DeliverDeps,
  delivery: ClaimedDelivery,
): Promise<AttemptOutcome> {
  const now = deps.now ?? Date.now;
  const { context } = delivery;
  const { webhook } = context;
  const record = (attempt: AttemptRecord, outcome: AttemptOutcome) =>
    deps.record({ delivery, attempt: storable(attempt), outcome }).then(() => outcome);
  const failure = (attempt: AttemptRecord, retryAfterMs: number | null = null) => {
    const retryInMs = nextRetryDelayMs(delivery.attempts + 1, {
      retryAfterMs,
      random: (deps.random ?? Math.random)(),
    });
    return record(
      attempt,
      retryInMs === null ? { state: "failed" } : { state: "pending", retryInMs },
    );
  };

  if (
    !webhook || !webhook.enabled || webhook.url === "" || !webhook.events.includes(delivery.topic)
  ) {
    return record(
      {
        statusCode: null,
        latencyMs: 0,
        error: UNSUBSCRIBED_CANCELLATION,
        responseExcerpt: null,
      },
      { state: "failed" },
    );
  }
  if (!context.conversation) {
    return record(
      {
        statusCode: null,
        latencyMs: 0,
        error: "cancelled: the conversation no longer exists",
        responseExcerpt: null,
      },
      { state: "failed" },
    );
  }

  const started = performance.now();
  let checked: CheckedUrl;
  try {
    checked = await deps.checkUrl(webhook.url);
  } catch (error) {
    // The reason (e.g. the blocked address) stays in the server's log: shown to the tenant, it
    // would let a name they control probe internal DNS.
    const reason = error instanceof UnsafeUrlError ? error.reason : String(error);
    log("warn", "webhook url refused at delivery", { app_id: delivery.appId, reason });
    return failure({
      statusCode: null,
      latencyMs: Math.round(performance.now() - started),
      error: "refused by the SSRF guard",
      responseExcerpt: null,
    });
  }

  const id = eventIdOf(delivery);
  // The conversation and message come from the snapshot the first claim kept: every attempt
  // sends the same bytes under the same id.
  const body = JSON.stringify({
    id,
    type: delivery.topic,
    created_at: delivery.createdAt,
    app_id: delivery.appId,
    data: context.message
      ? { conversation: context.conversation, message: context.message }
      : { conversation: context.conversation },
  });
  const timestamp = Math.floor(now() / 1000);
  let response: PinnedResponse;
  try {
    response = await deps.post({
      url: checked.url,
      address: checked.addresses[0],
      headers: {
        "Content-Type": "application/json",
        "User-Agent": "Parley-Webhooks/1",
        ...signatureHeaders({
          id,
          timestamp,
          body,
          secret: deps.secretBox.open(webhook.secretSealed),
        }),
      },
      body,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      caCerts: deps.caCerts,
    });
  } catch (error) {
    return failure({
      statusCode: null,
      latencyMs: Math.round(performance.now() - started),
      error: error instanceof Error ? error.message : String(error),
      responseExcerpt: null,
    });
  }
  const attempt: AttemptRecord = {
    statusCode: response.status,
    latencyMs: Math.round(response.latencyMs),
    error: null,
    responseExcerpt: response.bodyExcerpt,
  };
  if (response.status >= 200 && response.status < 300) {
    return record(attempt, { state: "succeeded" });
  }
  attempt.error = response.status >= 300 && response.status < 400
    ? `redirect not followed (HTTP ${response.status})`
    : `HTTP ${response.status}`;
  const retryAfter = response.status === 429 || response.status === 503
    ? parseRetryAfter(response.headers.get("retry-after"), now())
    : null;
  return failure(attempt, retryAfter);
}
