/**
 * The client's IP address: the connection's peer, or — only when the operator says a proxy
 * in front can be trusted (`TRUST_PROXY=1`) — the left-most `X-Forwarded-For` entry, as CONTRACT
 * §1 says: the original client when every hop appends. That entry is whatever reached the first
 * proxy, so the proxy in front must set the header to the peer it saw rather than append to what
 * the client sent (nginx: `proxy_set_header X-Forwarded-For $remote_addr`), or every request
 * could name a fresh address and escape the per-IP limits.
 */
import type { Context } from "hono";
import { getConnInfo } from "hono/deno";

/** The IP address the request came from. */
export function clientIp(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = c.req.header("x-forwarded-for")?.split(",", 1)[0].trim();
    if (forwarded) return forwarded;
  }
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    return "unknown"; // no connection info (e.g. app.request() in a test)
  }
}
