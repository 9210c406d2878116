/**
 * A TCP proxy in front of a test database that breaks one connection on cue, the way the
 * network or PostgreSQL itself does: the driver's side of a lost connection, without a real outage.
 */

/** What the proxy does with a chunk a client sends. */
export type ProxyMove =
  /** Passes it on. */
  | "pass"
  /** Answers as a backend ended by `pg_terminate_backend` does, and closes the connection. */
  | "terminate"
  /** Passes it on, lets the server act on it, and closes the connection before its answer. */
  | "pass-then-cut"
  /** Keeps it, and everything after it on the connection, as a server that froze does. */
  | "hold";

/** A running proxy; its `url` reaches the database through it. */
export interface PgProxy {
  url: string;
  /** How many connections it broke. */
  readonly broken: number;
  close(): void;
}

/** How long a passed-on chunk is given to take effect before its connection is cut. */
const SERVER_ACTS_MS = 300;

/**
 * Starts a proxy to the database of `databaseUrl`. `decide` sees each chunk a client sends, as
 * text, and how many connections were broken so far.
 */
export function startPgProxy(
  databaseUrl: string,
  decide: (text: string, broken: number) => ProxyMove,
): PgProxy {
  const target = new URL(databaseUrl);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let broken = 0;
  (async () => {
    for await (const inbound of listener) {
      const outbound = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
      open.add(inbound).add(outbound);
      let answering = true;
      const cut = () => {
        for (const conn of [inbound, outbound]) if (open.delete(conn)) closeQuietly(conn);
      };
      const toClient = inbound.writable.getWriter();
      void (async () => {
        for await (const chunk of outbound.readable) if (answering) await toClient.write(chunk);
      })().catch(cut);
      void (async () => {
        const toServer = outbound.writable.getWriter();
        let holding = false;
        for await (const chunk of inbound.readable) {
          const move = holding ? "hold" : decide(new TextDecoder().decode(chunk), broken);
          if (move === "hold") {
            holding = true;
            continue;
          }
          if (move === "terminate") {
            broken++;
            await toClient.write(terminatedResponse());
            return cut();
          }
          if (move === "pass-then-cut") {
            broken++;
            answering = false;
            await toServer.write(chunk);
            await new Promise((resolve) => setTimeout(resolve, SERVER_ACTS_MS));
            return cut();
          }
          await toServer.write(chunk);
        }
      })().catch(cut);
    }
  })().catch(() => {});
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String((listener.addr as Deno.NetAddr).port);
  url.searchParams.delete("host");
  return {
    url: url.toString(),
    get broken() {
      return broken;
    },
    close() {
      listener.close();
      for (const conn of open) closeQuietly(conn);
      open.clear();
    },
  };
}

/** PostgreSQL's ErrorResponse of a backend ended by `pg_terminate_backend` (57P01). */
function terminatedResponse(): Uint8Array {
  const encoder = new TextEncoder();
  const fields = [
    ["S", "FATAL"],
    ["V", "FATAL"],
    ["C", "57P01"],
    ["M", "terminating connection due to administrator command"],
  ];
  const body = [...fields.flatMap(([key, value]) => [...encoder.encode(key + value), 0]), 0];
  const message = new Uint8Array(5 + body.length);
  message[0] = "E".charCodeAt(0);
  new DataView(message.buffer).setInt32(1, 4 + body.length);
  message.set(body, 5);
  return message;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Its stream closed it already.
  }
}
