/**
 * When a failed webhook delivery is tried again (CONTRACT §5.2): at once, then after 5 s, 5 min,
 * 30 min, 2 h, 5 h, 10 h and 10 h; then the delivery is marked failed. Each delay is lengthened by
 * up to 10% (never shortened: no attempt comes sooner than the contract says) so that a receiver
 * coming back is not hit by every delivery in the same second. A receiver's `Retry-After` (on 429
 * and 503) is honoured when it asks for longer.
 */

/** Delays before attempts 2, 3, … in milliseconds (attempt 1 runs at once). */
export const RETRY_DELAYS_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;

/** Attempts made before a delivery is failed. */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** Longest `Retry-After` honoured, in milliseconds. */
const MAX_RETRY_AFTER_MS = 10 * 3_600_000;

/**
 * The delay before the next attempt after `attemptsMade` failed ones, or null when the delivery
 * is out of attempts. `random` is in [0, 1).
 */
export function nextRetryDelayMs(
  attemptsMade: number,
  options: { retryAfterMs?: number | null; random?: number } = {},
): number | null {
  if (!Number.isInteger(attemptsMade) || attemptsMade < 1) {
    throw new RangeError(`Cannot schedule a retry: attemptsMade must be >= 1, got ${attemptsMade}`);
  }
  if (attemptsMade >= MAX_ATTEMPTS) return null;
  const base = RETRY_DELAYS_MS[attemptsMade - 1];
  const jittered = Math.round(base * (1 + 0.1 * (options.random ?? Math.random())));
  const asked = Math.min(options.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS);
  return Math.max(jittered, asked);
}

/** Reads a `Retry-After` value (seconds or an HTTP date) as milliseconds from `now`. */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (value === null) return null;
  if (/^\d{1,9}$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}
