/**
 * Reads one HTTP/1.1 response from a connection for the webhook deliverer: the status line and
 * headers, and the body as its framing says (Content-Length, chunked, or until close), keeping
 * only an excerpt and never more than a fixed budget, so that no receiver can hold a worker with
 * a huge or endless answer.
 */

/** How many bytes of a body the excerpt keeps. */
export const EXCERPT_BYTES = 1024;

/** How many bytes (headers and body) are read at most; the rest of a response is dropped. */
export const MAX_READ_BYTES = 64 * 1024;

/** An HTTP field name (RFC 9110 `token`). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A response that does not follow HTTP/1.1; the message says how. */
export class ProtocolError extends Error {}

/** Buffered reading from the connection, at most {@linkcode MAX_READ_BYTES} in all. */
export class Source {
  /** Bytes read and not consumed yet. */
  pending: Uint8Array = new Uint8Array(0);
  /** Bytes read so far. */
  received = 0;
  /** The peer closed the connection. */
  ended = false;
  /** {@linkcode MAX_READ_BYTES} were read; reading stopped. */
  capped = false;

  constructor(
    readonly conn: { read(buffer: Uint8Array): Promise<number | null> },
    readonly step: <T>(op: Promise<T>) => Promise<T>,
  ) {}

  /** Reads more into `pending`; false at the end of the connection or of the read budget. */
  async more(): Promise<boolean> {
    if (this.ended || this.capped) return false;
    if (this.received >= MAX_READ_BYTES) {
      this.capped = true;
      return false;
    }
    const chunk = new Uint8Array(Math.min(16 * 1024, MAX_READ_BYTES - this.received));
    let count: number | null;
    try {
      count = await this.step(this.conn.read(chunk));
    } catch (error) {
      // A peer that closes without TLS close_notify ends the stream all the same.
      if (!(error instanceof Deno.errors.UnexpectedEof)) throw error;
      count = null;
    }
    if (count === null) {
      this.ended = true;
      return false;
    }
    this.received += count;
    const joined = new Uint8Array(this.pending.length + count);
    joined.set(this.pending);
    joined.set(chunk.subarray(0, count), this.pending.length);
    this.pending = joined;
    return true;
  }

  /** Removes and returns the first `count` pending bytes. */
  take(count: number): Uint8Array {
    const taken = this.pending.subarray(0, count);
    this.pending = this.pending.subarray(count);
    return taken;
  }

  /** The next line without its line ending, or null when the input stops before one. */
  async line(): Promise<string | null> {
    for (;;) {
      const end = this.pending.indexOf(0x0a);
      if (end >= 0) return latin1(this.take(end + 1)).replace(/\r?\n$/, "");
      if (!await this.more()) return null;
    }
  }
}

/** The first bytes of a body, up to {@linkcode EXCERPT_BYTES}. */
class Excerpt {
  readonly bytes = new Uint8Array(EXCERPT_BYTES);
  length = 0;

  add(data: Uint8Array): void {
    const room = EXCERPT_BYTES - this.length;
    if (room > 0) {
      this.bytes.set(data.subarray(0, room), this.length);
      this.length += Math.min(room, data.length);
    }
  }

  /**
   * The UTF-8 text, without a character cut in half at the end, and still at most
   * {@linkcode EXCERPT_BYTES} once stored: each invalid byte of a binary body decodes to U+FFFD,
   * three bytes of UTF-8, so what comes after the budget is left out.
   */
  text(): string {
    const text = new TextDecoder().decode(this.bytes.subarray(0, this.length), { stream: true });
    const { read } = new TextEncoder().encodeInto(text, new Uint8Array(EXCERPT_BYTES));
    return text.slice(0, read);
  }
}

/** Bytes as a string of the same char codes (how HTTP field bytes map to `Headers`). */
function latin1(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return text;
}

/** A response as read: status, headers and the body's first bytes as text. */
export interface HttpResponse {
  status: number;
  headers: Headers;
  bodyExcerpt: string;
  /**
   * Whether the body was read to its end as its framing says (or to the read budget). False when
   * it broke off, came malformed or outlasted the deadline: the status still stands.
   */
  bodyComplete: boolean;
}

/**
 * Reads the final response: status line, headers, and as much of the body as allowed. Once the
 * final status line and headers are in, the answer is given: a body that then breaks off, is
 * malformed or is still trickling at the deadline (`source.step` rejecting) leaves the excerpt
 * read so far and `bodyComplete` false. A receiver that answered 2xx in time accepted the event,
 * however slowly it sends the rest (CONTRACT §5.2: "any 2xx within 10 s").
 */
export async function readResponse(source: Source): Promise<HttpResponse> {
  for (;;) {
    const { status, headers } = await readHead(source);
    // Interim responses (100 Continue, 103 Early Hints) precede the real one.
    if (status >= 100 && status < 200 && status !== 101) continue;
    const excerpt = new Excerpt();
    let bodyComplete = true;
    try {
      await readBody(source, status, headers, excerpt);
    } catch {
      bodyComplete = false;
    }
    return { status, headers, bodyExcerpt: excerpt.text(), bodyComplete };
  }
}

/** Reads a status line and the header section. */
async function readHead(source: Source): Promise<{ status: number; headers: Headers }> {
  const statusLine = await source.line();
  if (statusLine === null) throw headError(source, "no status line");
  const match = /^HTTP\/1\.[01] ([1-9]\d\d)(?: .*)?$/.exec(statusLine);
  if (match === null) throw new ProtocolError("bad status line");
  const headers = new Headers();
  for (;;) {
    const line = await source.line();
    if (line === null) throw headError(source, "incomplete headers");
    if (line === "") break;
    const colon = line.indexOf(":");
    const name = line.slice(0, colon);
    if (colon <= 0 || !TOKEN.test(name)) throw new ProtocolError("bad header line");
    try {
      headers.append(name, line.slice(colon + 1).trim());
    } catch {
      throw new ProtocolError("bad header value");
    }
  }
  return { status: Number(match[1]), headers };
}

/** Why the head could not be read: too large, or the connection ended. */
function headError(source: Source, ended: string): ProtocolError {
  return new ProtocolError(source.capped ? "headers too large" : ended);
}

/** Reads the body as its framing says (RFC 9112 §6.3) into `excerpt`, until the read budget. */
async function readBody(
  source: Source,
  status: number,
  headers: Headers,
  excerpt: Excerpt,
): Promise<void> {
  if (status === 204 || status === 304 || status < 200) return;
  const transferEncoding = headers.get("transfer-encoding");
  if (transferEncoding !== null) {
    const codings = transferEncoding.split(",").map((coding) => coding.trim().toLowerCase());
    if (codings.at(-1) === "chunked") return await readChunked(source, excerpt);
    return await readUntilClose(source, excerpt);
  }
  const contentLength = headers.get("content-length");
  if (contentLength !== null) {
    // Repeated fields arrive joined with ", "; they must all agree.
    const values = new Set(contentLength.split(",").map((value) => value.trim()));
    const [value] = values;
    if (values.size !== 1 || !/^\d{1,15}$/.test(value)) {
      throw new ProtocolError("bad Content-Length");
    }
    await readLength(source, Number(value), excerpt);
    return;
  }
  return await readUntilClose(source, excerpt);
}

/** Reads `length` bytes; false when the read budget ran out first. */
async function readLength(source: Source, length: number, excerpt: Excerpt): Promise<boolean> {
  let remaining = length;
  while (remaining > 0) {
    if (source.pending.length === 0 && !await source.more()) {
      if (source.capped) return false;
      throw new ProtocolError("body ended early");
    }
    const data = source.take(Math.min(remaining, source.pending.length));
    excerpt.add(data);
    remaining -= data.length;
  }
  return true;
}

/** Reads a chunked body, trailers included. */
async function readChunked(source: Source, excerpt: Excerpt): Promise<void> {
  for (;;) {
    const sizeLine = await source.line();
    if (sizeLine === null) return endedInBody(source);
    const size = /^([0-9A-Fa-f]{1,12})[ \t]*(?:;.*)?$/.exec(sizeLine);
    if (size === null) throw new ProtocolError("bad chunk size");
    const length = parseInt(size[1], 16);
    if (length === 0) break;
    if (!await readLength(source, length, excerpt)) return;
    const end = await source.line();
    if (end === null) return endedInBody(source);
    if (end !== "") throw new ProtocolError("bad chunk end");
  }
  // Trailer fields, up to the empty line; a peer that closes instead has sent everything.
  for (;;) {
    const trailer = await source.line();
    if (trailer === null || trailer === "") return;
  }
}

/** The input stopped inside a framed body: fine at the read budget, malformed otherwise. */
function endedInBody(source: Source): void {
  if (!source.capped) throw new ProtocolError("body ended early");
}

/** Reads until the peer closes the connection (or the read budget runs out). */
async function readUntilClose(source: Source, excerpt: Excerpt): Promise<void> {
  do excerpt.add(source.take(source.pending.length)); while (await source.more());
}
