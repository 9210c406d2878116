/**
 * TLS client connections for the webhook deliverer, over `node:tls` rather than `Deno.startTls`.
 * Deno 2.9 keeps the socket of a `Deno.startTls` (or `Deno.connectTls`) connection open until its
 * handshake ends, even after `close()`: a receiver that accepts TCP and never answers the
 * handshake held one descriptor per attempt until the peer gave up, and a webhook url pointed at
 * such a host ran the process out of descriptors in minutes. A `node:tls` socket is released when
 * it is destroyed, in any state.
 *
 * The connection goes to a given IP address (never resolved: the lookup answers the address
 * itself) while SNI and the certificate check use the url's host name.
 */
import { isIP, type LookupFunction } from "node:net";
import tls from "node:tls";

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
  /** Destroys the socket (whatever its state) and releases its descriptor. */
  close(): void;
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

/** Opens a connection; use its `connected` and `secured` promises to follow it. */
export function openTls(options: TlsConnectOptions): TlsConnection {
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

  const closedBefore = (what: string) => () =>
    Promise.reject(failure ?? new Error(`connection closed before ${what}`));
  const connected = new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("close", () => closedBefore("connecting")().catch(reject));
  });
  const secured = new Promise<void>((resolve, reject) => {
    socket.once("secureConnect", resolve);
    socket.once("close", () => closedBefore("the handshake ended")().catch(reject));
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
    close() {
      ended = true;
      socket.destroy();
      wakeReader();
    },
  };
}
