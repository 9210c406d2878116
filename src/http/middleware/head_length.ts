/**
 * HEAD answered with the length GET would send. Hono answers a HEAD with its GET route's response
 * stripped of its body, and Deno then sends `Content-Length: 0` — which RFC 9110 §8.6 forbids
 * when GET's body is not empty. The answers Parley builds in memory (JSON or text, with a
 * charset) get their real length here; a streamed one (a media file, always under its bare media
 * type: `media_response.ts`) is left as its route made it, never read to be measured.
 */
import type { MiddlewareHandler } from "hono";

/** The Content-Type of an answer built in memory, whose length is known once built. */
const BUILT_IN_MEMORY = /^(?:application\/json|text\/[a-z]+)\s*;\s*charset=/i;

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
