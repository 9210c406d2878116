/**
 * Fixed-window rate limiting in the contract's terms (CONTRACT §2.3): every response, errors
 * included, carries `X-RateLimit-Limit/Remaining/Reset` and the IETF draft's
 * `RateLimit-Policy`/`RateLimit`; a request over the limit gets `429 Rate limit exceeded`
 * with `Retry-After`. Counts live in PostgreSQL, shared by every instance.
 */
import type { Context, MiddlewareHandler } from "hono";
import type { HitCounter } from "../../rate_limit/hit_counter.ts";
import { AppError } from "../../domain/app_error.ts";

/** Options of {@linkcode rateLimit}. */
export interface RateLimitOptions {
  /** Where hits are counted. */
  counter: HitCounter;
  /** Requests allowed per bucket and minute. */
  limit: number;
  /** The bucket of a request (e.g. its API key, visitor token or client IP). */
  bucketOf(c: Context): string | Promise<string>;
}

/** Creates the rate-limit middleware. */
export function rateLimit(options: RateLimitOptions): MiddlewareHandler {
  const { counter, limit, bucketOf } = options;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new RangeError(
      `Cannot create rate limit: limit must be a positive integer, got ${limit}`,
    );
  }
  const limitText = String(limit);
  const policy = `"default";q=${limit};w=60`;
  return async function rateLimitMiddleware(c, next) {
    // Awaited only when they are promises: an in-memory counter answers at once, and every
    // await is a turn of the microtask queue on the busiest routes.
    const bucket = bucketOf(c);
    const hit = counter.hit(typeof bucket === "string" ? bucket : await bucket);
    const { count, resetAt } = hit instanceof Promise ? await hit : hit;
    const remaining = Math.max(0, limit - count);
    const secondsToReset = Math.max(1, Math.ceil(resetAt - Date.now() / 1000));
    const headers: [string, string][] = [
      ["X-RateLimit-Limit", limitText],
      ["X-RateLimit-Remaining", String(remaining)],
      ["X-RateLimit-Reset", String(resetAt)],
      ["RateLimit-Policy", policy],
      ["RateLimit", `"default";r=${remaining};t=${secondsToReset}`],
    ];
    if (count > limit) {
      throw new AppError(429, "Rate limit exceeded", {
        headers: { ...Object.fromEntries(headers), "Retry-After": String(secondsToReset) },
      });
    }
    await next();
    for (const [name, value] of headers) c.res.headers.set(name, value);
  };
}
