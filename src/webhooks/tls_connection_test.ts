/**
 * Tests of the deliverer's TLS connections: Deno's TLS by default, node:tls for endpoints that
 * stalled a handshake and once a worker abandoned too many handshakes — verifying
 * certificates the same way. (The two tell themselves apart by their errors' wording.)
 */
import assert from "node:assert/strict";
import type * as TlsConnectionModule from "./tls_connection.ts";
import { selfSignedCertificate } from "../../tests/support/tls.ts";
import { clientSocketsTo, silentListener } from "../../tests/support/silent_peer.ts";
import { waitUntil } from "../../tests/support/realtime.ts";

type Tls = typeof TlsConnectionModule;

const HOOKS = await selfSignedCertificate(["hooks.test"]);
let instances = 0;

/**
 * A fresh instance of the module, its counts at zero: tests in this process (other files' too)
 * share the imported one, whose counts they change.
 */
function freshModule(): Promise<Tls> {
  return import(`./tls_connection.ts?instance=${++instances}`);
}

/** A connection to a receiver on loopback `port` for `serverName`, trusting HOOKS' certificate. */
function connectTo(tls: Tls, port: number, serverName: string) {
  return tls.openTls({ address: "127.0.0.1", port, serverName, caCerts: [HOOKS.cert] });
}

/** Opens a connection to `port` for `serverName` and gives it up after `ms` of handshake. */
async function stall(tls: Tls, port: number, ms = 50): Promise<void> {
  const conn = tls.openTls({ address: "127.0.0.1", port, serverName: "hooks.test" });
  await conn.connected;
  await new Promise((resolve) => setTimeout(resolve, ms));
  conn.close();
  await conn.secured.catch(() => {});
}

/** The handshake's failure message (for the wrong name) of a connection to a TLS server on `port`. */
async function wrongNameMessage(tls: Tls, port: number): Promise<string> {
  const conn = connectTo(tls, port, "other.test");
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

/** Sends one line to a "pong" server over a verified connection; what came back. */
async function exchangeOnce(tls: Tls, port: number): Promise<string> {
  const conn = connectTo(tls, port, "hooks.test");
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
  const tls = await freshModule();
  const silent = silentListener();
  const port = silent.port;
  await stall(tls, port);
  await silent.release();
  const server = tlsServer(port);
  try {
    assert.match(
      await wrongNameMessage(tls, port),
      /not valid for name "other\.test"/,
      "Deno's TLS",
    );
    // The stalled endpoint is hooks.test on this port: it now goes through node:tls.
    assert.equal(await exchangeOnce(tls, port), "pong");
    const stalledName = tls.openTls({ address: "127.0.0.1", port, serverName: "hooks.test" });
    const untrusted = await stalledName.secured.then(() => "secured", (error) => error.message);
    stalledName.close();
    assert.match(untrusted, /self-signed certificate/, "node:tls checks the chain");
  } finally {
    await server.close();
  }
});

Deno.test("after too many abandoned handshakes every new connection is node:tls", async () => {
  const tls = await freshModule();
  const silent = Array.from({ length: tls.MAX_ABANDONED_HANDSHAKES }, () => silentListener());
  const server = tlsServer();
  try {
    assert.match(
      await wrongNameMessage(tls, server.port),
      /not valid for name/,
      "Deno's TLS first",
    );
    await Promise.all(silent.map((listener) => stall(tls, listener.port)));
    assert.match(
      await wrongNameMessage(tls, server.port),
      /is not in the cert's altnames/,
      "node:tls",
    );
    assert.equal(await exchangeOnce(tls, server.port), "pong");
  } finally {
    for (const listener of silent) await listener.release();
    await server.close();
  }
});

Deno.test("a handshake that fails by itself marks nothing: the endpoint keeps Deno's TLS", async () => {
  const tls = await freshModule();
  const server = tlsServer();
  try {
    for (let i = 0; i < 20; i++) {
      const conn = connectTo(tls, server.port, "other.test");
      const message = await conn.secured.then(() => "secured", (error) => error.message);
      conn.close();
      assert.match(message, /not valid for name "other\.test"/, `attempt ${i + 1}: Deno's TLS`);
    }
  } finally {
    await server.close();
  }
});

Deno.test("handshakes in flight count: a burst beyond the bound waits, and at most the bound stay open", async () => {
  const tls = await freshModule();
  const silent = Array.from({ length: 40 }, () => silentListener());
  try {
    const conns = silent.map((listener) =>
      tls.openTls({ address: "127.0.0.1", port: listener.port, serverName: "hooks.test" })
    );
    // Those beyond the bound wait for a slot that the stalled ones never give back.
    const reachedNow = () => silent.filter((listener) => listener.accepted.length > 0).length;
    await waitUntil(() => reachedNow() >= tls.MAX_ABANDONED_HANDSHAKES, "the bound reached");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const reached = reachedNow();
    assert.equal(reached, tls.MAX_ABANDONED_HANDSHAKES);
    for (const conn of conns) conn.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    let open = 0;
    for (const listener of silent) open += await clientSocketsTo(listener.port);
    assert.ok(open <= tls.MAX_ABANDONED_HANDSHAKES, `${open} of our sockets still open`);
  } finally {
    for (const listener of silent) await listener.release();
  }
});

Deno.test("one endpoint holds at most two handshake slots: a silent one cannot take them all", async () => {
  const tls = await freshModule();
  const silent = silentListener();
  const server = tlsServer();
  try {
    const stalled = Array.from(
      { length: 10 },
      () => tls.openTls({ address: "127.0.0.1", port: silent.port, serverName: "hooks.test" }),
    );
    await waitUntil(() => silent.accepted.length >= 2, "two handshakes started");
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(silent.accepted.length, 2);
    // Another endpoint's connections still start at once.
    assert.equal(await exchangeOnce(tls, server.port), "pong");
    for (const conn of stalled) conn.close();
  } finally {
    await silent.release();
    await server.close();
  }
});
