/**
 * Tests of the deliverer's TLS connections: Deno's TLS by default, node:tls for endpoints that
 * stalled a handshake and once a worker abandoned too many handshakes — verifying
 * certificates the same way. (The two tell themselves apart by their errors' wording.)
 */
import assert from "node:assert/strict";
import { MAX_ABANDONED_HANDSHAKES, openTls } from "./tls_connection.ts";
import { selfSignedCertificate } from "../../tests/support/tls.ts";

const HOOKS = await selfSignedCertificate(["hooks.test"]);

/** A listener that accepts and never speaks; `release` closes what it accepted. */
function silentListener(port = 0) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port });
  const accepted: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) accepted.push(conn);
  })().catch(() => {});
  return {
    port: listener.addr.port,
    accepted,
    released: false,
    async release() {
      if (this.released) return;
      this.released = true;
      listener.close();
      await accepting;
      for (const conn of accepted) conn.close();
    },
  };
}

/** Opens a connection to `port` for `serverName` and gives it up after `ms` of handshake. */
async function stall(port: number, ms = 50): Promise<void> {
  const conn = openTls({ address: "127.0.0.1", port, serverName: "hooks.test" });
  await conn.connected;
  await new Promise((resolve) => setTimeout(resolve, ms));
  conn.close();
  await conn.secured.catch(() => {});
}

/** The handshake's failure message (for the wrong name) of a connection to a TLS server on `port`. */
async function wrongNameMessage(port: number): Promise<string> {
  const conn = openTls({
    address: "127.0.0.1",
    port,
    serverName: "other.test",
    caCerts: [HOOKS.cert],
  });
  try {
    await conn.secured;
  } catch (error) {
    return (error as Error).message;
  } finally {
    conn.close();
  }
  assert.fail("the handshake should fail");
}

/** A TLS server for hooks.test on `port` that answers every line with "pong". */
function tlsServer(port = 0) {
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port,
    cert: HOOKS.cert,
    key: HOOKS.key,
  });
  const conns: Deno.TlsConn[] = [];
  const serving = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      (async () => {
        const buffer = new Uint8Array(1024);
        while (await conn.read(buffer) !== null) await conn.write(new TextEncoder().encode("pong"));
      })().catch(() => {});
    }
  })().catch(() => {});
  return {
    port: listener.addr.port,
    async close() {
      listener.close();
      await serving;
      for (const conn of conns) conn.close();
    },
  };
}

async function exchangeOnce(port: number): Promise<string> {
  const conn = openTls({
    address: "127.0.0.1",
    port,
    serverName: "hooks.test",
    caCerts: [HOOKS.cert],
  });
  try {
    await conn.secured;
    await conn.write(new TextEncoder().encode("ping\n"));
    const buffer = new Uint8Array(16);
    const count = await conn.read(buffer);
    return new TextDecoder().decode(buffer.subarray(0, count ?? 0));
  } finally {
    conn.close();
  }
}

Deno.test("an endpoint that stalled a handshake gets node:tls connections, verified all the same", async () => {
  const silent = silentListener();
  const port = silent.port;
  await stall(port);
  await silent.release();
  const server = tlsServer(port);
  try {
    assert.match(await wrongNameMessage(port), /not valid for name "other\.test"/, "Deno's TLS");
    // The stalled endpoint is hooks.test on this port: it now goes through node:tls.
    assert.equal(await exchangeOnce(port), "pong");
    const stalledName = openTls({ address: "127.0.0.1", port, serverName: "hooks.test" });
    const untrusted = await stalledName.secured.then(() => "secured", (error) => error.message);
    stalledName.close();
    assert.match(untrusted, /self-signed certificate/, "node:tls checks the chain");
  } finally {
    await server.close();
  }
});

Deno.test("after too many abandoned handshakes every new connection is node:tls", async () => {
  const silent = Array.from({ length: MAX_ABANDONED_HANDSHAKES }, () => silentListener());
  const server = tlsServer();
  try {
    assert.match(await wrongNameMessage(server.port), /not valid for name/, "Deno's TLS first");
    await Promise.all(silent.map((listener) => stall(listener.port)));
    assert.match(await wrongNameMessage(server.port), /is not in the cert's altnames/, "node:tls");
    assert.equal(await exchangeOnce(server.port), "pong");
    // Once the peers leave, the abandoned handshakes end and Deno's TLS is used again.
  } finally {
    for (const listener of silent) await listener.release();
    await server.close();
  }
});
