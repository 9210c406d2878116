/**
 * The one place Parley builds `@slack/web-api` clients and reads their errors (CONTRACT §6.2).
 * The official client POSTs each method form-encoded to `<slackApiUrl><method>` with the token
 * as `Authorization: Bearer`; pointed at `SLACK_API_URL` it talks to Slack or to the fake in
 * tests alike. By default it honours Slack's rate limits itself: on HTTP 429 it pauses the
 * client's whole queue for `Retry-After` seconds and tries again. With `rejectRateLimited` (the
 * mirror's sends, which hold a lease) it throws at once instead, and the caller waits. It retries
 * 5xx answers and network failures a few times — so that a call waits a little rather than fails
 * at once, while the callers' own outboxes keep the longer retries and their state in the database.
 */
import { ErrorCode, LogLevel, type RetryOptions, WebClient } from "@slack/web-api";

/**
 * Retries within one call: two more attempts, 0.5 s then 1 s apart (after a 429 the client also
 * waits out `Retry-After` first). Longer outages are the outbox's to retry.
 */
const RETRY_CONFIG: RetryOptions = { retries: 2, factor: 2, minTimeout: 500, maxTimeout: 2_000 };
/** A call that hangs this long is abandoned (the client's default is to wait forever). */
const TIMEOUT_MS = 10_000;
/** What the client throws once every attempt was answered 429: a plain, uncoded Error. */
const RATE_LIMIT_EXHAUSTED = /^A rate limit was exceeded \(url: .*, retry-after: (\d+)\)$/;
/** What it throws for a 429 whose `Retry-After` is missing or unreadable. */
const RATE_LIMIT_UNREADABLE = "Retry header did not contain a valid timeout";

/** What Parley needs to know of a failed Web API call. */
export interface SlackErrorInfo {
  /**
   * Slack's error code for a refused call (`channel_not_found`, `invalid_auth`, …),
   * `ratelimited` when Slack kept answering 429, `http_error` for another HTTP status,
   * `request_error` when Slack could not be reached, `unknown_error` for anything else.
   */
  code: string;
  /** How long Slack asked to wait before trying again, when it said; else null. */
  retryAfterMs: number | null;
}

/** Options of {@linkcode createSlackWebClient}. */
export interface SlackWebClientOptions {
  /**
   * Reject a 429 at once (`ErrorCode.RateLimitedError`, with its `Retry-After`) rather than
   * wait it out inside the call: for callers that hold a lease, which a wait as long as Slack
   * asks could outlast. @default false
   */
  rejectRateLimited?: boolean;
}

/**
 * A Web API client for `token` that sends to `apiUrl` (`SLACK_API_URL`, e.g.
 * `https://slack.com/api/`): two retries of its own (0.5 s, then 1 s apart), rate-limited
 * calls waited out and retried (unless `rejectRateLimited`), a 10 s timeout, and only errors
 * logged — never a token, which the client redacts in any case. Make one per token and reuse it:
 * its queue is what spaces the calls of one workspace after a 429.
 */
export function createSlackWebClient(
  token: string | undefined,
  apiUrl: string,
  options: SlackWebClientOptions = {},
): WebClient {
  return new WebClient(token, {
    slackApiUrl: apiUrl,
    retryConfig: RETRY_CONFIG,
    rejectRateLimitedCalls: options.rejectRateLimited ?? false,
    timeout: TIMEOUT_MS,
    logLevel: LogLevel.ERROR,
  });
}

/** `seconds` in milliseconds when it is a usable number, else null. */
function secondsToMs(seconds: unknown): number | null {
  const value = typeof seconds === "string" ? Number.parseInt(seconds, 10) : seconds;
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value * 1000 : null;
}

/**
 * Reads an error thrown by a `WebClient` call: `ErrorCode.PlatformError` (Slack answered
 * `"ok": false`) → its `data.error`; `ErrorCode.RateLimitedError` → `ratelimited` with its
 * `retryAfter`; `ErrorCode.HTTPError` → `http_error` (with a `Retry-After` header when sent);
 * `ErrorCode.RequestError` → `request_error`. The plain Error the client throws when its retries
 * ran out on 429s is `ratelimited` with the last `Retry-After`. Anything else: `unknown_error`.
 */
export function slackErrorOf(error: unknown): SlackErrorInfo {
  if (typeof error !== "object" || error === null) {
    return { code: "unknown_error", retryAfterMs: null };
  }
  const coded = error as {
    code?: unknown;
    message?: unknown;
    data?: { error?: unknown; response_metadata?: { retryAfter?: unknown } };
    retryAfter?: unknown;
    headers?: Record<string, unknown>;
  };
  switch (coded.code) {
    case ErrorCode.PlatformError: {
      const code = typeof coded.data?.error === "string" ? coded.data.error : "platform_error";
      return { code, retryAfterMs: secondsToMs(coded.data?.response_metadata?.retryAfter) };
    }
    case ErrorCode.RateLimitedError:
      return { code: "ratelimited", retryAfterMs: secondsToMs(coded.retryAfter) };
    case ErrorCode.HTTPError:
      return { code: "http_error", retryAfterMs: secondsToMs(coded.headers?.["retry-after"]) };
    case ErrorCode.RequestError:
      return { code: "request_error", retryAfterMs: null };
  }
  const message = typeof coded.message === "string" ? coded.message : "";
  const exhausted = RATE_LIMIT_EXHAUSTED.exec(message);
  if (exhausted !== null) return { code: "ratelimited", retryAfterMs: secondsToMs(exhausted[1]) };
  if (message.startsWith(RATE_LIMIT_UNREADABLE)) return { code: "ratelimited", retryAfterMs: null };
  return { code: "unknown_error", retryAfterMs: null };
}
