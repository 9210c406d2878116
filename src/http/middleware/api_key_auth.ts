/**
 * Open API authentication (CONTRACT §2.2): the key comes from `Authorization: Bearer` when that
 * header uses the Bearer scheme, else from `X-Api-Key`; a missing, malformed, unknown or revoked
 * key is `401 Invalid or missing API key` with `WWW-Authenticate`. Lookups are cached for less
 * than a second, so a revocation made anywhere takes effect within a second everywhere while a
 * busy key costs the database one query a second per instance.
 */
import type { Context, MiddlewareHandler } from "hono";
import { AppError } from "../../domain/app_error.ts";
import { isApiKeyFormat } from "../../crypto/tokens.ts";

/** Who an authenticated request acts for. */
export interface ApiCaller {
  appId: number;
  keyId: number;
}

/** Variables this middleware sets on the context. */
export interface ApiKeyAuthVariables {
  caller: ApiCaller;
}

/** Options of {@linkcode apiKeyAuth}. */
export interface ApiKeyAuthOptions {
  /** The active key with this plaintext, or null (unknown or revoked). */
  findKey(key: string): Promise<ApiCaller | null>;
  /** How long a lookup may be reused, in milliseconds (at most 1000). @default 900 */
  cacheMs?: number;
  /** Most keys cached. @default 10_000 */
  cacheSize?: number;
}

/**
 * The credential of an `Authorization` header when its scheme is Bearer (any case), else null:
 * everything after `Bearer `, as sent. Nothing is trimmed: a key padded with more spaces is no
 * key (401), so padding cannot buy a rate-limit bucket of its own for a valid key.
 */
export function bearerCredential(authorization: string | undefined): string | null {
  const bearer = authorization ? /^Bearer (.*)$/is.exec(authorization) : null;
  return bearer ? bearer[1] : null;
}

/** The key a request presents, if any (CONTRACT §2.2's precedence). */
export function presentedApiKey(c: Context): string | undefined {
  return bearerCredential(c.req.header("authorization")) ??
    (c.req.header("x-api-key")?.trim() || undefined);
}

interface CacheEntry {
  caller: Promise<ApiCaller | null>;
  expiresAt: number;
}

/** Creates the authentication middleware. */
export function apiKeyAuth(
  options: ApiKeyAuthOptions,
): MiddlewareHandler<{ Variables: ApiKeyAuthVariables }> {
  const { findKey, cacheMs = 900, cacheSize = 10_000 } = options;
  if (!(cacheMs >= 0 && cacheMs <= 1000)) {
    throw new RangeError(`Cannot create API key auth: cacheMs must be 0..1000, got ${cacheMs}`);
  }
  const cache = new Map<string, CacheEntry>();

  function lookUp(key: string): Promise<ApiCaller | null> {
    const now = performance.now();
    const cached = cache.get(key);
    if (cached && cached.expiresAt > now) return cached.caller;
    // The entry counts from before the query, so it never outlives a revocation by cacheMs.
    const caller = findKey(key);
    cache.delete(key);
    cache.set(key, { caller, expiresAt: now + cacheMs });
    caller.catch(() => cache.delete(key));
    // Expired entries go as new ones come (revoked keys' lookups among them), not only once the
    // cache is full: it stays as small as the keys used in the last second.
    sweep(now);
    return caller;
  }

  function sweep(now: number): void {
    // Oldest first (a Map iterates in insertion order): expired entries, then whatever exceeds
    // the size, and no further — a flood of new keys costs one deletion each, not a full pass.
    for (const [key, entry] of cache) {
      if (entry.expiresAt <= now || cache.size > cacheSize) cache.delete(key);
      else break;
    }
  }

  return async function apiKeyAuthMiddleware(c, next) {
    const key = presentedApiKey(c);
    const caller = key && isApiKeyFormat(key) ? await lookUp(key) : null;
    if (!caller) {
      throw new AppError(401, "Invalid or missing API key", {
        headers: { "WWW-Authenticate": 'Bearer realm="parley"' },
      });
    }
    c.set("caller", caller);
    await next();
  };
}
