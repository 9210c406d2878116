/**
 * Peers that accept TCP connections and never speak (a receiver that never answers the TLS
 * handshake), and a count of our side's sockets to them, read from the kernel's table so that
 * other tests' sockets in the same process do not count.
 */

/** A loopback listener that accepts and never speaks; `release` closes what it accepted. */
export interface SilentListener {
  port: number;
  /** The connections accepted so far (the peer's ends). */
  accepted: Deno.Conn[];
  /** Stops listening and closes the accepted connections (again: nothing). */
  release(): Promise<void>;
}

/** Listens on loopback (`port`, or a free one) and accepts connections it never answers. */
export function silentListener(port = 0): SilentListener {
  const listener = Deno.listen({ hostname: "127.0.0.1", port });
  const accepted: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) accepted.push(conn);
  })().catch(() => {});
  let released = false;
  return {
    port: listener.addr.port,
    accepted,
    async release() {
      if (released) return;
      released = true;
      listener.close();
      await accepting;
      for (const conn of accepted) conn.close();
    },
  };
}

/** Established IPv4 connections to `port` from a client: the sockets on our side of them. */
export async function clientSocketsTo(port: number): Promise<number> {
  const table = await Deno.readTextFile("/proc/net/tcp");
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  // Columns: sl, local address:port, remote address:port, state (01 = established), ...
  return table.split("\n").slice(1).filter((line) => {
    const columns = line.trim().split(/\s+/);
    return columns[2]?.endsWith(`:${hexPort}`) && columns[3] === "01";
  }).length;
}
