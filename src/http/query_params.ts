/**
 * Readings of query-string values as zod schemas, so that they validate and document themselves:
 * lenient where the contract wants it (a limit that is not an integer means the default, one out
 * of range is clamped, a bad message cursor means none), strict for filters.
 */
import { z } from "zod";

/**
 * A `limit` parameter: an integer (of any length) clamped to `min..max`; absent or not an
 * integer means `fallback`. As a zod schema, so that it validates and documents itself.
 */
export function limitParam(fallback: number, min: number, max: number) {
  return z.preprocess(
    (value) =>
      typeof value === "string" && /^-?[0-9]+$/.test(value)
        ? Math.min(max, Math.max(min, Number(value)))
        : fallback,
    z.int().min(min).max(max),
  ).meta({
    description: `Default ${fallback}; integers are clamped to ${min}..${max}; ` +
      `anything else means ${fallback}`,
    default: fallback,
  });
}

/**
 * A positive integer id in a path or query (leading zeros allowed); anything else — and an id
 * too large to be one of ours — stays a string and fails.
 */
export function idParam(description: string) {
  return z.preprocess(
    (value) => typeof value === "string" && /^[0-9]+$/.test(value) ? safeId(value) ?? value : value,
    z.int().positive(),
  ).meta({ description });
}

/**
 * The id a string of digits names, or null when it is beyond the ids Parley hands out (they stay
 * exact in a JavaScript number, so no such row can exist).
 */
export function safeId(digits: string): number | null {
  const id = Number(digits);
  return Number.isSafeInteger(id) ? id : null;
}

/** An optional filter: one of `values`, or absent (an empty value counts as absent). */
export function filterParam<const T extends readonly [string, ...string[]]>(
  values: T,
  description: string,
) {
  return z.preprocess(
    (value) => value === "" ? undefined : value,
    z.enum(values).optional(),
  ).meta({ description });
}

/**
 * The query of a conversation's history (widget and Open API alike): the latest `limit` messages
 * (default 50, clamped to 1..200), only those before message id `before`; never refused.
 */
export const HISTORY_QUERY = z.object({
  limit: limitParam(50, 1, 200),
  before: z.preprocess(
    // An id beyond ours has every message before it: the same as none.
    (value) =>
      typeof value === "string" && /^[0-9]+$/.test(value) && Number(value) > 0
        ? safeId(value) ?? undefined
        : undefined,
    z.int().positive().optional(),
  ).meta({ description: "Only messages with a smaller id (a message id)" }),
});
