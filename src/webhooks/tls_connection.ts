/**
 * TLS client connections for the webhook deliverer to a given IP address (never resolved: it is
 * the one the SSRF guard checked), with the url's host name for SNI and the certificate check.
 *
 * Two implementations behind one interface. Deno's own TLS (`Deno.startTls`) is the fast one, but
 * Deno 2.9 keeps its socket open after `close()` until the handshake ends: a receiver that accepts
 * TCP and never answers the handshake used to hold one descriptor per attempt, and a webhook url
 * pointed at such a host ran the process out of descriptors in minutes. A `node:tls` socket is
 * released when destroyed in any state, but costs ~100 µs more CPU per request (measured with 8
 * deliveries in flight on keep-alive connections). So a connection uses Deno's TLS unless its
 * endpoint has stalled a handshake in the last hour, or the worker has already abandoned
 * {@linkcode MAX_ABANDONED_HANDSHAKES} handshakes: then `node:tls`. Deno handshakes in progress
 * and abandoned ones together never pass that number (more wait for a slot, and one endpoint holds
 * at most two slots), so a worker never holds more than that many sockets for receivers that never
 * answer, and one silent receiver cannot push it to `node:tls` alone.
 */
import { isIP, type LookupFunction } from "node:net";
import tls from "node:tls";
import { log } from "../log.ts";

/** Where to connect and what to trust. */
export interface TlsConnectOptions {
  /** The IPv4 or IPv6 literal to connect to (IPv6 without brackets). */
  address: string;
  port: number;
  /** The host name the certificate must be valid for (and the SNI, unless it is an IP). */
  serverName: string;
  /** Extra PEM roots, trusted besides the default ones. */
  caCerts?: string[];
}

/** A client TLS connection: bytes in, bytes out, closed at once in any state. */
export interface TlsConnection {
  /** Settles when the TCP connection is made (rejects when it is not). */
  readonly connected: Promise<void>;
  /** Settles when the handshake is done and the certificate verified (rejects when not). */
  readonly secured: Promise<void>;
  /** Reads into `buffer`: the byte count, or null at the end of the stream. */
  read(buffer: Uint8Array): Promise<number | null>;
  /** Writes all of `data`. */
  write(data: Uint8Array): Promise<void>;
  /** Whether the connection can still carry a request: open, not ended, nothing unread. */
  readonly reusable: boolean;
  /** Marks the connection idle (between requests, in the keep-alive pool). */
  idle(): void;
  /** Destroys the socket (whatever its state) and releases its descriptor. */
  close(): void;
}

/**
 * Deno handshakes a worker may have in progress or abandoned together; a connection beyond waits
 * for one in progress to end. Deno rejects an abandoned handshake's promise at once but frees its
 * socket only when the peer answers or leaves, which nothing here can observe, so abandoned ones
 * count for the worker's lifetime; once there are this many, every connection is node:tls.
 */
export const MAX_ABANDONED_HANDSHAKES = 16;
/** How long an endpoint that stalled a handshake gets node:tls connections. */
const STALLED_ENDPOINT_MS = 3_600_000;

/**
 * Deno handshakes one endpoint may have in progress at once: a receiver that never answers the
 * handshake holds at most this many of the worker's slots before it is known to stall.
 */
const MAX_HANDSHAKES_PER_ENDPOINT = 2;

/** Deno handshakes given up on so far while in progress (each may still hold its socket). */
let abandonedHandshakes = 0;
/** Deno connections holding a handshake slot (connecting or handshaking), in all and by endpoint. */
let handshaking = 0;
const handshakingTo = new Map<string, number>();
/** Deno connections waiting for a handshake slot, first come first served. */
const slotWaiters: { endpoint: string; grant(): void; refuse(error: Error): void }[] = [];
/** Endpoints (address, port, server name) that stalled a handshake, with when. */
const stalledEndpoints = new Map<string, number>();

/** Whether a handshake to `endpoint` may start now. */
function slotFree(endpoint: string): boolean {
  return abandonedHandshakes + handshaking < MAX_ABANDONED_HANDSHAKES &&
    (handshakingTo.get(endpoint) ?? 0) < MAX_HANDSHAKES_PER_ENDPOINT;
}

function holdSlot(endpoint: string): void {
  handshaking++;
  handshakingTo.set(endpoint, (handshakingTo.get(endpoint) ?? 0) + 1);
}

/** A handshake slot for `endpoint`: at once when one is free, else when one in progress ends. */
function takeSlot(endpoint: string): Promise<void> {
  if (slotFree(endpoint)) {
    holdSlot(endpoint);
    return Promise.resolve();
  }
  return new Promise((grant, refuse) => slotWaiters.push({ endpoint, grant, refuse }));
}

/** Gives `endpoint`'s slot back; `abandoned`: its handshake goes on holding a socket. */
function releaseSlot(endpoint: string, abandoned: boolean): void {
  handshaking--;
  const left = (handshakingTo.get(endpoint) ?? 1) - 1;
  if (left > 0) handshakingTo.set(endpoint, left);
  else handshakingTo.delete(endpoint);
  if (abandoned) {
    abandonedHandshakes++;
    if (abandonedHandshakes === MAX_ABANDONED_HANDSHAKES) {
      log("warn", "webhook TLS handshakes stalled; node:tls from now on", {
        abandoned: abandonedHandshakes,
      });
      // No slot will be free again: whoever waits fails now (and is retried over node:tls).
      for (const waiter of slotWaiters.splice(0)) {
        waiter.refuse(new Error("TLS handshakes stalled"));
      }
      return;
    }
  }
  // The first waiters whose endpoints have room, in order.
  for (let i = 0; i < slotWaiters.length;) {
    if (!slotFree(slotWaiters[i].endpoint)) {
      i++;
      continue;
    }
    const [waiter] = slotWaiters.splice(i, 1);
    holdSlot(waiter.endpoint);
    waiter.grant();
  }
}

/** Opens a connection; use its `connected` and `secured` promises to follow it. */
export function openTls(options: TlsConnectOptions): TlsConnection {
  const endpoint = `${options.address}|${options.port}|${options.serverName}`;
  const stalledAt = stalledEndpoints.get(endpoint);
  if (stalledAt !== undefined && performance.now() - stalledAt > STALLED_ENDPOINT_MS) {
    stalledEndpoints.delete(endpoint);
  }
  if (abandonedHandshakes >= MAX_ABANDONED_HANDSHAKES || stalledEndpoints.has(endpoint)) {
    return openNodeTls(options);
  }
  return openDenoTls(options, endpoint);
}

/** A connection over Deno's TLS. */
function openDenoTls(options: TlsConnectOptions, endpoint: string): TlsConnection {
  const { address, port, serverName, caCerts } = options;
  const connectAbort = new AbortController();
  let conn: Deno.Conn | undefined;
  let closed = false;
  let handshakeStarted = false;
  let handshakeDone = false;
  /** Its handshake slot: waited for, held, or given back (or never to be taken). */
  let slot: "waiting" | "held" | "released" = "waiting";
  const slotTaken = takeSlot(endpoint);
  /** The handshake ended (or will never start): its slot goes back. */
  const settle = (abandoned = false) => {
    if (slot === "held") releaseSlot(endpoint, abandoned);
    slot = "released";
  };
  /** A read started while the connection idled in the pool, and what it brought. */
  let idleRead: Promise<number | null> | null = null;
  let idleBuffer = new Uint8Array(0);
  let idleBytes: Uint8Array | null = null;
  let idleAnswered = false;

  const connected = slotTaken.then(() => {
    if (slot === "released") {
      // Closed while waiting, and the slot granted meanwhile: give it on.
      releaseSlot(endpoint, false);
      throw new Error("connection closed before connecting");
    }
    slot = "held";
    return Deno.connect({ hostname: address, port, signal: connectAbort.signal });
  }).then((tcp) => {
    if (closed) {
      tcp.close();
      throw new Error("connection closed before connecting");
    }
    tcp.setNoDelay(true);
    conn = tcp;
  });
  connected.catch(() => settle());
  const secured = connected.then(async () => {
    const tls = await Deno.startTls(conn as Deno.TcpConn, { hostname: serverName, caCerts });
    conn = tls;
    if (closed) {
      tls.close();
      throw new Error("connection closed before the handshake");
    }
    handshakeStarted = true;
    try {
      await tls.handshake();
    } finally {
      // A handshake that fails by itself (a bad certificate, a reset) frees its socket.
      if (!closed) settle();
    }
    handshakeDone = true;
  });
  secured.catch(() => {});

  /** Copies what the idle read brought into `buffer`. */
  const takeIdleBytes = (buffer: Uint8Array): number => {
    const bytes = idleBytes!;
    const count = Math.min(bytes.length, buffer.length);
    buffer.set(bytes.subarray(0, count));
    idleBytes = count === bytes.length ? null : bytes.subarray(count);
    return count;
  };

  return {
    connected,
    secured,
    async read(buffer) {
      if (idleBytes) return takeIdleBytes(buffer);
      if (idleRead) {
        // The response's first bytes come through the read the idle connection had waiting.
        const pending = idleRead;
        idleRead = null;
        const count = await pending;
        if (count === null) return null;
        idleBytes = idleBuffer.subarray(0, count);
        return takeIdleBytes(buffer);
      }
      if (!conn || closed) return null;
      return await conn.read(buffer);
    },
    async write(data) {
      if (!conn || closed) throw new Error("connection closed");
      let written = 0;
      while (written < data.length) written += await conn.write(data.subarray(written));
    },
    get reusable() {
      return !closed && handshakeDone && !idleAnswered && idleBytes === null;
    },
    idle() {
      if (!conn || closed || idleRead) return;
      // Whatever comes while no request is out (an unasked 408, the peer's close) must not be
      // read as the next request's answer: it makes the connection unusable instead.
      idleBuffer = new Uint8Array(16 * 1024);
      const read = conn.read(idleBuffer);
      idleRead = read;
      // Only while still idle: once a request took the read over, its bytes are the answer.
      const answered = () => {
        if (idleRead === read) idleAnswered = true;
      };
      read.then(answered, answered);
    },
    close() {
      if (closed) return;
      closed = true;
      connectAbort.abort();
      if (handshakeStarted && !handshakeDone && slot === "held") {
        // Its socket stays open until the peer answers or leaves: it keeps counting, and this
        // endpoint's next connections go through node:tls.
        if (stalledEndpoints.size >= 1_000) stalledEndpoints.clear();
        stalledEndpoints.set(endpoint, performance.now());
        settle(true);
      } else if (slot === "waiting") {
        // Still waiting: the grant, when it comes, is passed on (see `connected`).
        slot = "released";
      } else {
        settle();
      }
      try {
        conn?.close();
      } catch {
        // already closed
      }
    },
  };
}

/** Unread bytes above which the socket stops reading from the network until they are taken. */
const HIGH_WATER_BYTES = 64 * 1024;

/** The default roots plus `caCerts`, built once per distinct list (each holds ~150 PEMs). */
const trustedRoots = new Map<string, string[]>();

function rootsWith(caCerts: string[]): string[] {
  const key = caCerts.join("\n");
  let roots = trustedRoots.get(key);
  if (!roots) {
    if (trustedRoots.size >= 16) trustedRoots.clear();
    roots = [...tls.rootCertificates, ...caCerts];
    trustedRoots.set(key, roots);
  }
  return roots;
}

/** A `node:tls` connection: released when closed in any state, ~100 µs more CPU per request. */
function openNodeTls(options: TlsConnectOptions): TlsConnection {
  const { address, port, serverName, caCerts } = options;
  const family = isIP(address);
  if (family === 0) throw new Error(`address is not an IP literal: ${address}`);
  // The address is the one that was checked: no name is ever resolved here.
  const pinned: LookupFunction = (_host, lookupOptions, callback) => {
    if (lookupOptions?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const socket = tls.connect({
    host: address,
    port,
    lookup: pinned,
    // RFC 6066: SNI carries host names only; an IP host is checked against the certificate's IPs.
    servername: isIP(serverName) === 0 ? serverName : undefined,
    checkServerIdentity: (_host, certificate) => tls.checkServerIdentity(serverName, certificate),
    // Explicit: Deno's node:tls would otherwise obey NODE_TLS_REJECT_UNAUTHORIZED=0.
    rejectUnauthorized: true,
    ca: caCerts && caCerts.length > 0 ? rootsWith(caCerts) : undefined,
  });
  // The request goes out in one write; Nagle's algorithm would only add delayed-ACK stalls.
  socket.setNoDelay(true);

  const chunks: Uint8Array[] = [];
  let queued = 0;
  let ended = false;
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  const wakeReader = () => {
    const resume = wake;
    wake = null;
    resume?.();
  };

  socket.on("data", (chunk: Uint8Array) => {
    chunks.push(chunk);
    queued += chunk.length;
    if (queued > HIGH_WATER_BYTES) socket.pause();
    wakeReader();
  });
  socket.on("end", () => {
    ended = true;
    wakeReader();
  });
  socket.on("close", () => {
    ended = true;
    wakeReader();
  });
  // Every error lands here (an idle pooled socket's too), never as an uncaught exception.
  socket.on("error", (error: Error) => {
    failure ??= error;
    wakeReader();
  });

  // A close after the event is too late to matter: a settled promise stays as it is.
  const connected = new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("close", () => reject(failure ?? new Error("connection closed before connecting")));
  });
  const secured = new Promise<void>((resolve, reject) => {
    socket.once("secureConnect", resolve);
    socket.once("close", () => reject(failure ?? new Error("connection closed in the handshake")));
  });
  connected.catch(() => {});
  secured.catch(() => {});

  return {
    connected,
    secured,
    async read(buffer) {
      while (chunks.length === 0) {
        if (failure) throw failure;
        if (ended) return null;
        if (socket.isPaused()) socket.resume();
        await new Promise<void>((resolve) => wake = resolve);
      }
      const chunk = chunks[0];
      const count = Math.min(chunk.length, buffer.length);
      buffer.set(chunk.subarray(0, count));
      if (count === chunk.length) chunks.shift();
      else chunks[0] = chunk.subarray(count);
      queued -= count;
      return count;
    },
    write(data) {
      return new Promise<void>((resolve, reject) => {
        if (failure || ended) {
          reject(failure ?? new Error("connection closed"));
          return;
        }
        socket.write(data, (error) => error ? reject(error) : resolve());
      });
    },
    get reusable() {
      return !ended && failure === null && chunks.length === 0 && !socket.destroyed;
    },
    idle() {
      // Data that comes while idle is queued by the "data" listener, which makes it unusable.
    },
    close() {
      ended = true;
      socket.destroy();
      wakeReader();
    },
  };
}
