/**
 * When a failed channel send is tried again (a chat cannot wait the hours a webhook can): after
 * 2 s, 10 s, 1 min, 5 min and 30 min, each ±20% so that a burst of failures does not retry in
 * lockstep, never sooner than the platform's `Retry-After` (up to {@linkcode MAX_SEND_RETRY_AFTER_MS}:
 * a chat's later messages wait behind the send); then the message is failed.
 */

/** The delays before the 2nd, 3rd, ... attempt, in milliseconds. */
export const SEND_RETRY_DELAYS_MS = [2_000, 10_000, 60_000, 300_000, 1_800_000] as const;

/** Longest `Retry-After` honoured, in milliseconds: the longest delay of the schedule. */
export const MAX_SEND_RETRY_AFTER_MS = 1_800_000;

/** Options of {@linkcode nextSendRetryDelayMs}. */
export interface SendRetryOptions {
  /** What the platform asked for (`Retry-After`), if anything. @default null */
  retryAfterMs?: number | null;
  /** A number in [0, 1) for the jitter. @default 0.5 (no jitter) */
  random?: number;
}

/**
 * The delay before the next attempt after `attempts` failed ones (1 after the first), or null
 * when the send has had all its attempts.
 */
export function nextSendRetryDelayMs(
  attempts: number,
  options: SendRetryOptions = {},
): number | null {
  if (!Number.isInteger(attempts) || attempts < 1) {
    throw new RangeError(`Cannot schedule a retry: attempts must be >= 1, got ${attempts}`);
  }
  if (attempts > SEND_RETRY_DELAYS_MS.length) return null;
  const base = SEND_RETRY_DELAYS_MS[attempts - 1];
  const jittered = Math.round(base * (0.8 + 0.4 * (options.random ?? 0.5)));
  return Math.max(jittered, Math.min(options.retryAfterMs ?? 0, MAX_SEND_RETRY_AFTER_MS));
}
