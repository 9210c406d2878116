/**
 * The client's IP address: the connection's peer, or — only when the operator says a proxy
 * in front can be trusted (`TRUST_PROXY=1`) — the right-most `X-Forwarded-For` entry, the one
 * that proxy added for the peer it saw (entries left of it are whatever the client sent).
 */
import type { Context } from "hono";
import { getConnInfo } from "hono/deno";

/** The IP address the request came from. */
export function clientIp(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = c.req.header("x-forwarded-for")?.split(",").at(-1)?.trim();
    if (forwarded) return forwarded;
  }
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    return "unknown"; // no connection info (e.g. app.request() in a test)
  }
}
