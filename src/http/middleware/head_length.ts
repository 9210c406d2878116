/**
 * HEAD answered with the length GET would send. Hono answers a HEAD with its GET route's response
 * stripped of its body, and Deno then sends `Content-Length: 0` — which RFC 9110 §8.6 forbids
 * when GET's body is not empty. The answers Parley builds in memory (JSON, text, HTML) get their
 * real length here; a streamed one (a media file) is left as its route made it.
 */
import type { MiddlewareHandler } from "hono";

/** Media types of the answers built in memory, whose length is known once built. */
const BUILT_IN_MEMORY = /^(?:application\/json|text\/)/i;

/** Creates the middleware; mount it before the routes. */
export function headLength(): MiddlewareHandler {
  return async function headLengthMiddleware(c, next) {
    await next();
    if (c.req.method !== "HEAD") return;
    const response = c.res;
    if (response.body === null || response.headers.has("content-length")) return;
    if (!BUILT_IN_MEMORY.test(response.headers.get("content-type") ?? "")) return;
    const bytes = await response.arrayBuffer();
    const headers = new Headers(response.headers);
    headers.set("content-length", String(bytes.byteLength));
    c.res = new Response(null, { status: response.status, headers });
  };
}
