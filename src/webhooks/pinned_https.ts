/**
 * One webhook POST over HTTPS to a pinned address (CONTRACT §5.2: "the connection goes to the
 * address that was checked"). `fetch` resolves the host name again, which would let a name that
 * passed the SSRF guard point somewhere else by the time of the connection (DNS rebinding), and it
 * cannot be told which address to use. So this module speaks HTTP/1.1 itself over a TLS
 * connection to the checked IP address (`tls_connection.ts`), with the url's host name driving
 * SNI and certificate verification, and sends the url's host in `Host`.
 *
 * The exchange is bounded: one deadline covers connect, handshake, write and read (the connection
 * is closed when it passes), and at most {@linkcode MAX_READ_BYTES} are read, of which the first
 * {@linkcode EXCERPT_BYTES} of the body are kept, so that a slow, huge or endless response cannot
 * hold a worker. Redirects are never followed. Every failure rejects with an `Error` whose message
 * is short enough for a delivery log (`timeout after 10000 ms`, `connection refused`,
 * `TLS: <message>`, `malformed response (...)`), the original error as its `cause`.
 */
import { ProtocolError, readResponse, Source, TOKEN } from "./http1_response.ts";
import { openTls, type TlsConnection } from "./tls_connection.ts";

/** One POST to send. */
export interface PinnedRequest {
  /**
   * Keep-alive connections to reuse and return to; without one, every request opens its own
   * connection and closes it (`Connection: close`). @default none
   */
  pool?: ConnectionPool;
  /** The `https` url; its path and query are sent, its host goes into SNI and `Host`. */
  url: URL;
  /** The IPv4 or IPv6 literal to connect to (IPv6 without brackets); never resolved. */
  address: string;
  /**
   * Request headers. `Host`, `Content-Length`, `Connection` and `Transfer-Encoding` are set by
   * {@linkcode postPinned}; the caller's values for them are ignored.
   */
  headers: Record<string, string>;
  /** The UTF-8 body, sent with `Content-Length`. */
  body: string;
  /** Deadline of the whole exchange (connect, TLS, write, read) in ms; then the connection is closed. */
  timeoutMs: number;
  /** Extra PEM root certificates (`WEBHOOK_CA_FILE`), trusted besides the system roots. */
  caCerts?: string[];
}

/** What the receiver answered. */
export interface PinnedResponse {
  /** The status code, 3xx included (redirects are not followed). */
  status: number;
  /** The response headers (final response; interim 1xx responses are skipped). */
  headers: Headers;
  /** The first {@linkcode EXCERPT_BYTES} bytes of the body, decoded as UTF-8. */
  bodyExcerpt: string;
  /**
   * Whether the body was read to its end; false when it broke off, was malformed or outlasted the
   * deadline after the status line and headers came (the status stands; the connection is closed).
   */
  bodyComplete: boolean;
  /** Milliseconds from the start of the exchange to the end of reading the response. */
  latencyMs: number;
}

export { EXCERPT_BYTES, MAX_READ_BYTES } from "./http1_response.ts";

/** Request headers that this module writes itself. */
const OWN_HEADERS = new Set(["host", "content-length", "connection", "transfer-encoding"]);

/** An address that is connected to as it is, never resolved. */
const IPV4_LITERAL = /^(?:\d{1,3}\.){3}\d{1,3}$/;
const IPV6_LITERAL = /^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*$/;

/** A failure of the exchange, with a message meant for a delivery log. */
function failure(message: string, cause?: unknown): Error {
  return new Error(message, cause === undefined ? undefined : { cause });
}

/** Idle keep-alive connections, reused by requests that name the same endpoint. */
export interface ConnectionPool {
  /** Closes every idle connection; the pool may be used again afterwards. */
  close(): void;
}

interface Idle {
  conn: TlsConnection;
  since: number;
}

/** The pool's side that {@linkcode postPinned} uses. */
interface PoolAccess extends ConnectionPool {
  take(key: string): TlsConnection | undefined;
  give(key: string, conn: TlsConnection): void;
  /**
   * An idle connection to the endpoint, or null: the caller opens one and calls `opened` once it
   * is open or failed. Waits while `maxOpeningPerKey` are being opened, for one of them or for a
   * connection given back; rejects with `timeout` when `waitMs` pass first.
   */
  acquire(key: string, waitMs: number, timeout: () => Error): Promise<TlsConnection | null>;
  opened(key: string): void;
}

/**
 * Creates a pool. A TLS handshake costs both ends far more CPU than a delivery's request, so a
 * deliverer that sends many events to one receiver keeps its connections. Connections are keyed by
 * the checked address, port, server name and trusted roots, so reuse never skips a check.
 */
export function createConnectionPool(
  options: { idleMs?: number; maxIdlePerKey?: number; maxOpeningPerKey?: number } = {},
): ConnectionPool {
  const { idleMs = 4_000, maxIdlePerKey = 64, maxOpeningPerKey = 4 } = options;
  const idle = new Map<string, Idle[]>();
  /** Connections being opened per endpoint, and the requests waiting for one. */
  const opening = new Map<string, number>();
  const waiting = new Map<string, (() => void)[]>();
  /** The endpoint's first waiter tries again (a connection was given back, or an opening ended). */
  function wakeOne(key: string): void {
    const queue = waiting.get(key);
    const next = queue?.shift();
    if (queue?.length === 0) waiting.delete(key);
    next?.();
  }
  let sweeper: ReturnType<typeof setInterval> | undefined;
  /** Closes what idled too long, so endpoints nobody calls any more hold no sockets. */
  function sweep(): void {
    const now = performance.now();
    for (const [key, list] of idle) {
      while (list.length > 0 && now - list[0].since >= idleMs) list.shift()!.conn.close();
      if (list.length === 0) idle.delete(key);
    }
    if (idle.size === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  }
  const pool: PoolAccess = {
    take(key) {
      const list = idle.get(key);
      const now = performance.now();
      while (list && list.length > 0) {
        const entry = list.pop()!;
        // A connection the receiver closed (or wrote to) while idle carries no request.
        if (now - entry.since < idleMs && entry.conn.reusable) return entry.conn;
        entry.conn.close();
      }
      return undefined;
    },
    give(key, conn) {
      conn.idle();
      const list = idle.get(key) ?? [];
      idle.set(key, list);
      const now = performance.now();
      while (list.length > 0 && (list.length >= maxIdlePerKey || now - list[0].since >= idleMs)) {
        list.shift()!.conn.close();
      }
      list.push({ conn, since: now });
      if (sweeper === undefined) {
        const timer = setInterval(sweep, idleMs);
        Deno.unrefTimer(timer);
        sweeper = timer;
      }
      wakeOne(key);
    },
    async acquire(key, waitMs, timeout) {
      const until = performance.now() + waitMs;
      while (true) {
        const conn = pool.take(key);
        if (conn) return conn;
        const count = opening.get(key) ?? 0;
        if (count < maxOpeningPerKey) {
          opening.set(key, count + 1);
          return null;
        }
        // A burst to a cold endpoint opened a connection per request at once: their handshakes
        // (hundreds of ms each at saturation, on both ends) held every slot. A few at a time,
        // reused as soon as each is open, serve the burst sooner.
        await new Promise<void>((resolve, reject) => {
          const queue = waiting.get(key) ?? [];
          waiting.set(key, queue);
          const wake = () => {
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(() => {
            const at = queue.indexOf(wake);
            if (at >= 0) queue.splice(at, 1);
            if (queue.length === 0 && waiting.get(key) === queue) waiting.delete(key);
            reject(timeout());
          }, Math.max(0, until - performance.now()));
          queue.push(wake);
        });
      }
    },
    opened(key) {
      const count = (opening.get(key) ?? 1) - 1;
      if (count === 0) opening.delete(key);
      else opening.set(key, count);
      wakeOne(key);
    },
    close() {
      clearInterval(sweeper);
      sweeper = undefined;
      for (const list of idle.values()) for (const entry of list) entry.conn.close();
      idle.clear();
      // Whoever waits opens a connection of their own.
      const woken = [...waiting.values()].flat();
      waiting.clear();
      opening.clear();
      for (const wake of woken) wake();
    },
  };
  return pool;
}

/**
 * POSTs `request.body` to `request.url` over a connection to `request.address`, verifying the
 * server certificate for the url's host name (against the system roots plus `caCerts`). Resolves
 * with the status, headers and a body excerpt of the response, whatever its status; rejects with
 * a short message (see the module comment) on a network, TLS or protocol failure or when
 * `timeoutMs` passes. The connection is always closed before the promise settles.
 */
export async function postPinned(request: PinnedRequest): Promise<PinnedResponse> {
  const pool = request.pool as PoolAccess | undefined;
  if (!pool) return await exchange(request);
  const key = endpointKey(request);
  const start = performance.now();
  const timeout = () => failure(`timeout after ${request.timeoutMs} ms`);
  const left = () => request.timeoutMs - (performance.now() - start);
  const reused = await pool.acquire(key, left(), timeout);
  if (reused === null) {
    // Told once the connection is open (others may then open theirs), or at the latest here
    // (it failed, or the request was refused before it was opened).
    let counted = true;
    const opened = () => {
      if (counted) pool.opened(key);
      counted = false;
    };
    try {
      return await exchange(request, undefined, { budgetMs: left(), opened });
    } finally {
      opened();
    }
  }
  try {
    return await exchange(request, reused, { budgetMs: left() });
  } catch (error) {
    // The receiver closed the idle connection before reading the request: one fresh try.
    if (!(error instanceof StaleConnection)) throw error;
  }
  return await exchange(request, undefined, { budgetMs: left() });
}

/** An idle connection the peer had closed: nothing was sent or answered on it. */
class StaleConnection extends Error {}

function endpointKey(request: PinnedRequest): string {
  return `${request.address}|${request.url.port}|${request.url.hostname}|${
    request.caCerts?.join("") ?? ""
  }`;
}

/** One request and response, on `reused` or on a new connection. */
async function exchange(
  request: PinnedRequest,
  reused?: TlsConnection,
  /** `budgetMs`: what is left of the deadline; `opened`: told once a new connection is open. */
  options: { budgetMs?: number; opened?: () => void } = {},
): Promise<PinnedResponse> {
  const start = performance.now();
  const { url, timeoutMs } = request;
  const pool = request.pool as PoolAccess | undefined;
  if (url.protocol !== "https:") throw failure("not an https URL");
  const address = request.address.replace(/^\[(.*)\]$/, "$1");
  if (!IPV4_LITERAL.test(address) && !IPV6_LITERAL.test(address)) {
    throw failure(`address is not an IP literal: ${request.address}`);
  }
  const head = requestHead(url, request.headers, request.body, pool !== undefined);
  const port = url.port === "" ? 443 : Number(url.port);
  const serverName = url.hostname.replace(/^\[(.*)\]$/, "$1");

  let conn: TlsConnection | undefined = reused;
  let keep = false;
  let timedOut = false;
  let expire!: (error: Error) => void;
  const expired = new Promise<never>((_, reject) => expire = reject);
  expired.catch(() => {});
  const timer = setTimeout(() => {
    timedOut = true;
    expire(failure(`timeout after ${timeoutMs} ms`));
    conn?.close();
  }, Math.max(0, options.budgetMs ?? timeoutMs));
  /** Awaits `op` until the deadline. */
  const step = <T>(op: Promise<T>): Promise<T> => Promise.race([op, expired]);

  let phase: "connect" | "TLS" | "write" | "read" = "connect";
  let source: Source | undefined;
  try {
    if (!conn) {
      conn = openTls({ address, port, serverName, caCerts: request.caCerts });
      await step(conn.connected);
      phase = "TLS";
      await step(conn.secured);
      options.opened?.();
    }
    phase = "write";
    await step(conn.write(head));
    phase = "read";
    source = new Source(conn, step);
    const response = await readResponse(source);
    keep = pool !== undefined && response.bodyComplete && response.status !== 101 &&
      !source.ended && !source.capped &&
      source.pending.length === 0 && !/\bclose\b/i.test(response.headers.get("connection") ?? "");
    return { ...response, latencyMs: Math.round(performance.now() - start) };
  } catch (error) {
    if (timedOut) throw failure(`timeout after ${timeoutMs} ms`, error);
    if (reused && (source === undefined || source.received === 0)) {
      throw new StaleConnection("stale", { cause: error });
    }
    throw describe(error, phase);
  } finally {
    clearTimeout(timer);
    if (keep && pool && conn !== undefined) pool.give(endpointKey(request), conn);
    else conn?.close();
  }
}

/** The request line, headers and body, encoded. */
function requestHead(
  url: URL,
  headers: Record<string, string>,
  body: string,
  keepAlive: boolean,
): Uint8Array {
  const bytes = new TextEncoder().encode(body);
  const lines = [
    `POST ${url.pathname || "/"}${url.search} HTTP/1.1`,
    `Host: ${url.host}`,
    keepAlive ? "Connection: keep-alive" : "Connection: close",
    `Content-Length: ${bytes.length}`,
  ];
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name) || /[\r\n\0]/.test(value)) {
      throw failure(`invalid request header: ${JSON.stringify(name)}`);
    }
    if (!OWN_HEADERS.has(name.toLowerCase())) lines.push(`${name}: ${value}`);
  }
  const headBytes = new TextEncoder().encode(`${lines.join("\r\n")}\r\n\r\n`);
  const all = new Uint8Array(headBytes.length + bytes.length);
  all.set(headBytes);
  all.set(bytes, headBytes.length);
  return all;
}

/** Node's error codes (node:tls connections) of a connection that the peer reset or cut. */
const RESET_CODES = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

/** The delivery-log message of an error thrown in `phase`. */
function describe(error: unknown, phase: "connect" | "TLS" | "write" | "read"): Error {
  if (error instanceof ProtocolError) return failure(`malformed response (${error.message})`);
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  if (code === "ECONNREFUSED") return failure("connection refused", error);
  if (code === "ENETUNREACH" || code === "EHOSTUNREACH") {
    return failure("network unreachable", error);
  }
  if (typeof code === "string" && RESET_CODES.has(code)) {
    return failure("connection reset", error);
  }
  if (phase === "TLS") return failure(`TLS: ${message}`, error);
  if (error instanceof Deno.errors.ConnectionRefused) return failure("connection refused", error);
  if (
    error instanceof Deno.errors.ConnectionReset || error instanceof Deno.errors.BrokenPipe ||
    error instanceof Deno.errors.ConnectionAborted
  ) {
    return failure("connection reset", error);
  }
  if (error instanceof Deno.errors.NetworkUnreachable) return failure("network unreachable", error);
  if (error instanceof Deno.errors.InvalidData) return failure(`TLS: ${message}`, error);
  return failure(`${phase}: ${message}`, error);
}
