/**
 * The request body limit (256 KiB): a bigger body is `413 Request body too large`, whether it
 * declares its length or streams. Mounted inside each surface, after its rate limit, so that
 * the refusal carries the rate-limit headers like every other answer.
 *
 * A body with a `Content-Length` is judged by the header alone and left untouched: reading
 * `Request.body` makes Deno hand the body over as a JavaScript stream, and every later read then
 * goes through it, which cost the widget's message route more CPU than the rest of its handler.
 * Only a streamed (chunked) body is read here, counted as it arrives, and handed on as bytes.
 */
import type { MiddlewareHandler } from "hono";
import { AppError } from "../../domain/app_error.ts";

/** Largest request body accepted, in bytes. */
export const MAX_BODY_BYTES = 256 * 1024;

/** Creates the body-limit middleware. */
export function bodySizeLimit(maxBytes: number = MAX_BODY_BYTES): MiddlewareHandler {
  if (!Number.isInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError(
      `Cannot create body limit: maxBytes must be a whole number, got ${maxBytes}`,
    );
  }
  return async function bodySizeLimitMiddleware(c, next) {
    const headers = c.req.raw.headers;
    const declared = headers.get("content-length");
    if (declared !== null && !headers.has("transfer-encoding")) {
      if (Number(declared) > maxBytes) throw tooLarge();
      return await next();
    }
    if (!c.req.raw.body) return await next();
    c.req.raw = new Request(c.req.raw, { body: await readLimited(c.req.raw.body, maxBytes) });
    await next();
  };
}

/** Reads `stream` whole, refusing it as soon as it passes `maxBytes`. */
async function readLimited(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<Blob> {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge();
    chunks.push(new Uint8Array(chunk));
  }
  return new Blob(chunks);
}

function tooLarge(): AppError {
  return new AppError(413, "Request body too large");
}
