/**
 * Lenient readings of query-string values, as the contract wants them: a limit that is not an
 * integer means the default and an integer out of range is clamped, never refused.
 */
import { z } from "zod";

/**
 * A `limit` parameter: an integer clamped to `min..max`; absent or not an integer means
 * `fallback`. As a zod schema, so that it validates and documents itself.
 */
export function limitParam(fallback: number, min: number, max: number) {
  return z.preprocess(
    (value) =>
      typeof value === "string" && /^-?[0-9]{1,16}$/.test(value)
        ? Math.min(max, Math.max(min, Number(value)))
        : fallback,
    z.int().min(min).max(max),
  ).meta({
    description: `Default ${fallback}; integers are clamped to ${min}..${max}; ` +
      `anything else means ${fallback}`,
    default: fallback,
  });
}

/** A positive integer id in a path or query; anything else stays a string and fails. */
export function idParam(description: string) {
  return z.preprocess(
    (value) =>
      typeof value === "string" && /^[1-9][0-9]{0,15}$/.test(value) ? Number(value) : value,
    z.int().positive(),
  ).meta({ description });
}
