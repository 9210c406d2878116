/**
 * The request body limit (256 KiB): a bigger body is `413 Request body too large`, whether it
 * declares its length or streams. Mounted inside each surface, after its rate limit, so that
 * the refusal carries the rate-limit headers like every other answer.
 *
 * A body with a `Content-Length` is judged by the header alone and left untouched: reading
 * `Request.body` makes Deno hand the body over as a JavaScript stream, and every later read then
 * goes through it, which cost the widget's message route more CPU than the rest of its handler.
 * Only a streamed (chunked) body is read here, counted as it arrives, and handed on as bytes. Either
 * way a body must arrive within {@linkcode BODY_DEADLINE_MS} (see {@linkcode arrivedWithin}).
 */
import type { MiddlewareHandler } from "hono";
import { AppError } from "../../domain/app_error.ts";
import { settledWithin } from "../../settled_within.ts";

/** Largest request body accepted, in bytes. */
export const MAX_BODY_BYTES = 256 * 1024;

/**
 * How long a client may take to send a body this module reads: one that trickles in must not hold
 * its connection and buffers for as long as it likes.
 */
export const BODY_DEADLINE_MS = 10_000;

/**
 * The answer to a request whose body ended short because its client closed the connection (all
 * of it, or only its sending side, still waiting for the answer): the client's failure, not the
 * server's, and logged so.
 */
export const BODY_NOT_RECEIVED = "Request body not received";

/** What Deno throws reading a body whose connection is gone. */
const CONNECTION_GONE = [
  Deno.errors.BadResource,
  Deno.errors.ConnectionReset,
  Deno.errors.ConnectionAborted,
  Deno.errors.UnexpectedEof,
  Deno.errors.BrokenPipe,
];

/**
 * Creates the body-limit middleware. Routes that must authenticate a request by its headers
 * before anything else (a platform's signature) do without it and read their body with
 * {@linkcode readRequestBody} once the headers passed: a request that cannot be authenticated gets
 * 401, whatever its size, and its upload is never read.
 */
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
    const body = await readWithin(c.req.raw.body, { maxBytes });
    // Not `new Request(c.req.raw, …)`: copying the request reads its `signal`, which Deno then
    // aborts on success and warns about (legacy request abort), once per worker.
    const { url, method } = c.req.raw;
    c.req.raw = new Request(url, { method, headers, body });
    await next();
  };
}

/**
 * The body of `request`, read whole as {@linkcode readWithin} does: `413 Request body too large`
 * at once for a declared length over `maxBytes`, else as soon as the bytes pass it; 408 once
 * {@linkcode BODY_DEADLINE_MS} have passed. An absent body is empty.
 */
export async function readRequestBody(
  request: Request,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  if (Number(request.headers.get("content-length")) > maxBytes) throw tooLarge();
  if (!request.body) return new Uint8Array(0);
  return await readWithin(request.body, { maxBytes });
}

/**
 * `reading` (a body read whole, e.g. `c.req.arrayBuffer()` of a body whose length was declared),
 * or `408 Request body not received in time` once `deadlineMs` have passed: a client that declares
 * 100 bytes and sends 7 must not hold its connection forever. The read itself is left to end with
 * the connection (the answer goes out before the body is whole, so the server closes it). A read
 * that fails because the client closed the connection is `400` {@linkcode BODY_NOT_RECEIVED}.
 */
export async function arrivedWithin<T>(
  reading: Promise<T>,
  deadlineMs: number = BODY_DEADLINE_MS,
): Promise<T> {
  const read = reading.catch((error) => {
    if (!CONNECTION_GONE.some((gone) => error instanceof gone)) throw error;
    throw new AppError(400, BODY_NOT_RECEIVED, { cause: error });
  });
  // A read that loses the race fails once the connection closes: settledWithin hears it.
  return await settledWithin(
    read,
    deadlineMs,
    () => new AppError(408, "Request body not received in time"),
  );
}

/**
 * Reads `stream` whole: `413 Request body too large` as soon as it passes `maxBytes`, `408 Request
 * body not received in time` once `deadlineMs` have passed (the stream is cancelled either way).
 */
export async function readWithin(
  stream: ReadableStream<Uint8Array>,
  options: { maxBytes: number; deadlineMs?: number },
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = stream.getReader();
  try {
    return await arrivedWithin(readAll(reader, options.maxBytes), options.deadlineMs);
  } catch (error) {
    reader.cancel().catch(() => {}); // also ends a read still waiting
    throw error;
  }
}

/** Everything `reader` gives, joined; `413 Request body too large` once it passes `maxBytes`. */
async function readAll(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > maxBytes) throw tooLarge();
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

function tooLarge(): AppError {
  return new AppError(413, "Request body too large");
}
