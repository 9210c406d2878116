/**
 * The rules of an application's webhook configuration (SPEC §2.4, §4.1; CONTRACT §5.1): the event
 * catalogue, and how a `PUT /webhook` body becomes the stored configuration — a full replacement
 * where every omitted field takes its zero value, unknown events are dropped, duplicates removed,
 * the catalogue's order kept, and a blank url disables the webhook.
 */
import { AppError } from "./app_error.ts";

/** Every event a webhook can subscribe to, in catalogue order. */
export const WEBHOOK_EVENTS = [
  "chat.started",
  "chat.ended",
  "message.received",
  "message.sent",
  "message.updated",
  "message.failed",
] as const;

/** A subscribable event name. */
export type WebhookEvent = typeof WEBHOOK_EVENTS[number];

/** A webhook configuration as `GET /webhook` shows it (never the secret). */
export interface WebhookConfig {
  url: string;
  events: WebhookEvent[];
  enabled: boolean;
}

/** The configuration of an application that never configured one. */
export const NO_WEBHOOK: WebhookConfig = { url: "", events: [], enabled: false };

/**
 * Why a pending delivery was cancelled: the webhook is disabled, or no longer subscribed to its
 * event (recorded when the configuration changes, or at an attempt that finds it so).
 */
export const UNSUBSCRIBED_CANCELLATION =
  "cancelled: the webhook is disabled or no longer subscribed";

/** Longest webhook url accepted, in characters. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * The configuration a `PUT /webhook` body asks for. Checks only shapes; whether a non-blank url
 * is safe to call is the SSRF guard's question.
 * @throws {AppError} 400 `Invalid webhook configuration: <detail>`
 */
export function webhookConfigOf(body: unknown): WebhookConfig {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw invalid("body must be a JSON object");
  }
  const { url = "", events = [], enabled = true } = body as Record<string, unknown>;
  if (typeof url !== "string") throw invalid("url must be a string");
  if (url.length > MAX_WEBHOOK_URL_LENGTH) {
    throw invalid(`url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  }
  if (!Array.isArray(events) || !events.every((name) => typeof name === "string")) {
    throw invalid("events must be an array of strings");
  }
  if (typeof enabled !== "boolean") throw invalid("enabled must be a boolean");
  // Whitespace around a url is forgiven, but for CR, LF and tab, left for the SSRF guard to
  // refuse (CONTRACT §5.3) wherever they stand.
  const trimmed = url.trim() === "" ? "" : url.replace(/^[^\S\t\r\n]+|[^\S\t\r\n]+$/g, "");
  return {
    url: trimmed,
    events: WEBHOOK_EVENTS.filter((name) => events.includes(name)),
    enabled: trimmed === "" ? false : enabled,
  };
}

function invalid(detail: string): AppError {
  return new AppError(400, `Invalid webhook configuration: ${detail}`);
}
