/**
 * How a widget request names its visitor (CONTRACT §3): a visitor token (`pv_<appId>_<hex>`,
 * stored as its SHA-256), sent as `Authorization: Bearer`, or for the socket (browsers cannot set
 * headers on a WebSocket) as `?token=`. Tokens cannot be revoked, so token → visitor is cached
 * without going stale.
 */
import type { Context } from "hono";
import type { Sql } from "../db/client.ts";
import { findVisitorByTokenHash } from "../db/visitors.ts";
import { sha256Hex, visitorTokenAppId } from "../crypto/tokens.ts";
import { AppError } from "../domain/app_error.ts";
import { createLruCache } from "../cache/lru_cache.ts";

/** A visitor as authenticated by its token. */
export interface Visitor {
  appId: number;
  clientId: number;
}

/** What {@linkcode createVisitorAuth} returns. */
export interface VisitorAuth {
  /** The visitor of `token`; throws the contract's 401 for a missing or unknown one. */
  authenticate(token: string | undefined): Promise<Visitor>;
  /**
   * The visitor of a token known without the database (cached); null when the database must
   * say. A missing or malformed token is refused at once (401).
   */
  knownVisitor(token: string | undefined): Visitor | null;
}

/** Most visitors whose token is remembered. */
const REMEMBERED_VISITORS = 50_000;

/** Creates the visitor authentication of one instance (its cache of known tokens). */
export function createVisitorAuth(sql: Sql): VisitorAuth {
  const visitors = createLruCache<string, Visitor>(REMEMBERED_VISITORS);
  return {
    async authenticate(token) {
      if (!token) throw invalidToken();
      const cached = visitors.get(token);
      if (cached) return cached;
      const appId = visitorTokenAppId(token);
      if (appId === null) throw invalidToken();
      const clientId = await findVisitorByTokenHash(sql, appId, sha256Hex(token));
      if (clientId === null) throw invalidToken();
      const visitor = { appId, clientId };
      visitors.set(token, visitor);
      return visitor;
    },
    knownVisitor(token) {
      if (!token || visitorTokenAppId(token) === null) throw invalidToken();
      return visitors.get(token) ?? null;
    },
  };
}

/**
 * The visitor token a request authenticates with: the Bearer token, or for the socket `?token=`
 * first.
 */
export function visitorTokenOf(c: Context): string | undefined {
  if (c.req.path.endsWith("/socket")) {
    const query = c.req.query("token");
    if (query !== undefined) return query;
  }
  const match = /^Bearer +(\S+)\s*$/i.exec(c.req.header("authorization") ?? "");
  return match?.[1];
}

/** The contract's answer to a missing, malformed or unknown visitor token. */
export function invalidToken(): AppError {
  return new AppError(401, "Invalid or missing visitor token", {
    headers: { "WWW-Authenticate": 'Bearer realm="parley-widget"' },
  });
}
