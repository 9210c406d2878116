/**
 * Tests of `postPinned` against real HTTPS receivers on loopback (`Deno.serve` with a self-signed
 * certificate for `hooks.test`, or raw TLS/TCP listeners for what a well-behaved server never
 * sends). `hooks.test` does not resolve, so a delivery that reaches the receiver proves that the
 * connection went to the pinned address while TLS and `Host` used the url's host name.
 */
import assert from "node:assert/strict";
import {
  createConnectionPool,
  EXCERPT_BYTES,
  type PinnedRequest,
  postPinned,
} from "./pinned_https.ts";
import { selfSignedCertificate } from "../../tests/support/tls.ts";
import { clientSocketsTo, silentListener } from "../../tests/support/silent_peer.ts";
import { waitUntil } from "../../tests/support/realtime.ts";

const HOOKS = await selfSignedCertificate(["hooks.test"]);
const OTHER = await selfSignedCertificate(["other.test"]);

/** What a receiver saw of one request. */
interface Seen {
  method: string;
  url: string;
  host: string | null;
  headers: Headers;
  body: string;
  remoteAddress: string;
}

/** A `Deno.serve` HTTPS receiver that records the requests it answers. */
function receiver(
  handler: (request: Request) => Response | Promise<Response>,
  options: { hostname?: string; certificate?: { cert: string; key: string } } = {},
): { server: Deno.HttpServer<Deno.NetAddr>; seen: Seen[] } {
  const seen: Seen[] = [];
  const { cert, key } = options.certificate ?? HOOKS;
  const server = Deno.serve(
    { port: 0, hostname: options.hostname ?? "127.0.0.1", cert, key, onListen() {} },
    async (request, info) => {
      seen.push({
        method: request.method,
        url: request.url,
        host: request.headers.get("host"),
        headers: request.headers,
        body: await request.text(),
        remoteAddress: info.remoteAddr.hostname,
      });
      return await handler(request);
    },
  );
  return { server, seen };
}

/** A request to `https://hooks.test:<port>/hooks/in?x=1` pinned to 127.0.0.1. */
function hookRequest(port: number, overrides: Partial<PinnedRequest> = {}): PinnedRequest {
  return {
    url: new URL(`https://hooks.test:${port}/hooks/in?x=1`),
    address: "127.0.0.1",
    headers: { "Content-Type": "application/json", "X-Webhook-Id": "evt_1" },
    body: JSON.stringify({ type: "message.created", text: "héllo" }),
    timeoutMs: 5_000,
    caCerts: [HOOKS.cert],
    ...overrides,
  };
}

/** The message of the error `promise` rejects with. */
async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof Error);
    return error.message;
  }
  assert.fail("expected a rejection");
}

/** A raw TLS listener (certificate for hooks.test) whose connections `serve` handles. */
function rawTlsServer(serve: (conn: Deno.TlsConn) => Promise<void>): {
  port: number;
  [Symbol.asyncDispose](): Promise<void>;
} {
  const listener = Deno.listenTls({ hostname: "127.0.0.1", port: 0, ...HOOKS });
  const handled: Promise<void>[] = [];
  const accepting = (async () => {
    for await (const conn of listener) {
      handled.push(
        serve(conn).catch(() => {}).finally(() => {
          try {
            conn.close();
          } catch {
            // already closed
          }
        }),
      );
    }
  })().catch(() => {});
  return {
    port: listener.addr.port,
    async [Symbol.asyncDispose]() {
      listener.close();
      await accepting;
      await Promise.all(handled);
    },
  };
}

/** Reads a request head (up to the empty line) from a raw connection. */
async function readRequestHead(conn: Deno.Conn): Promise<string> {
  let text = "";
  const buffer = new Uint8Array(4096);
  while (!text.includes("\r\n\r\n")) {
    const count = await conn.read(buffer);
    if (count === null) break;
    text += new TextDecoder().decode(buffer.subarray(0, count));
  }
  return text;
}

/** Writes a whole string to a raw connection. */
async function writeText(conn: Deno.Conn, text: string): Promise<void> {
  const bytes = new TextEncoder().encode(text);
  let written = 0;
  while (written < bytes.length) written += await conn.write(bytes.subarray(written));
}

Deno.test("postPinned sends the body and headers and returns status, headers and excerpt", async () => {
  const { server, seen } = receiver(() =>
    new Response("accepted ✓", { status: 202, headers: { "X-Receiver": "yes" } })
  );
  await using _ = server;
  const request = hookRequest(server.addr.port);
  const response = await postPinned(request);

  assert.equal(response.status, 202);
  assert.equal(response.bodyExcerpt, "accepted ✓");
  assert.equal(response.headers.get("x-receiver"), "yes");
  assert.equal(response.headers.get("X-RECEIVER"), "yes");
  assert.ok(response.latencyMs >= 0 && response.latencyMs < 5_000);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].method, "POST");
  assert.equal(seen[0].body, request.body);
  assert.equal(seen[0].headers.get("content-type"), "application/json");
  assert.equal(seen[0].headers.get("x-webhook-id"), "evt_1");
  assert.equal(
    seen[0].headers.get("content-length"),
    String(new TextEncoder().encode(request.body).length),
  );
});

Deno.test("postPinned connects to the pinned address but sends Host and SNI of the url", async () => {
  const { server, seen } = receiver(() => new Response("ok"));
  await using _ = server;
  const port = server.addr.port;
  await postPinned(
    hookRequest(port, { headers: { Host: "evil.test", "Content-Length": "1", Connection: "x" } }),
  );

  assert.equal(seen.length, 1);
  assert.equal(seen[0].host, `hooks.test:${port}`);
  assert.equal(seen[0].url, `https://hooks.test:${port}/hooks/in?x=1`);
  assert.equal(seen[0].remoteAddress, "127.0.0.1");
});

Deno.test("postPinned rejects a certificate not signed by a trusted root", async () => {
  const { server, seen } = receiver(() => new Response("ok"));
  await using _ = server;
  const message = await rejection(
    postPinned(hookRequest(server.addr.port, { caCerts: undefined })),
  );

  assert.match(message, /^TLS: .*UnknownIssuer/);
  assert.equal(seen.length, 0);
});

Deno.test("postPinned rejects a certificate issued for another host name", async () => {
  const { server, seen } = receiver(() => new Response("ok"), { certificate: OTHER });
  await using _ = server;
  const message = await rejection(
    postPinned(hookRequest(server.addr.port, { caCerts: [HOOKS.cert, OTHER.cert] })),
  );

  assert.match(message, /^TLS: .*not valid for name "hooks\.test"/);
  assert.equal(seen.length, 0);
});

Deno.test("postPinned returns a 302 as is and does not follow it", async () => {
  const { server, seen } = receiver(() =>
    new Response(null, { status: 302, headers: { Location: "https://hooks.test/elsewhere" } })
  );
  await using _ = server;
  const response = await postPinned(hookRequest(server.addr.port));

  assert.equal(response.status, 302);
  assert.equal(response.headers.get("location"), "https://hooks.test/elsewhere");
  assert.equal(response.bodyExcerpt, "");
  assert.equal(seen.length, 1);
});

Deno.test("postPinned decodes a chunked response body", async () => {
  const parts = ["first ", "zweite ", "trois—", "четыре"];
  const { server } = receiver(() => {
    const body = ReadableStream.from(parts.map((part) => new TextEncoder().encode(part)));
    return new Response(body, { status: 200 });
  });
  await using _ = server;
  const response = await postPinned(hookRequest(server.addr.port));

  assert.equal(response.headers.get("transfer-encoding"), "chunked");
  assert.equal(response.bodyExcerpt, parts.join(""));
});

Deno.test("postPinned keeps a 1024-byte excerpt of a 200 KiB body without hanging", async () => {
  const { server } = receiver(() => new Response("a€".repeat(200 * 1024 / 4)));
  await using _ = server;
  const started = performance.now();
  const response = await postPinned(hookRequest(server.addr.port));

  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-length"), String(200 * 1024));
  // 1024 bytes of "a€" (4 bytes each) are 256 whole pairs.
  assert.equal(new TextEncoder().encode(response.bodyExcerpt).length, EXCERPT_BYTES);
  assert.equal(response.bodyExcerpt, "a€".repeat(256));
  assert.ok(performance.now() - started < 4_000);
});

Deno.test("postPinned keeps a binary body's excerpt within 1024 bytes of UTF-8", async () => {
  const bytes = new Uint8Array(4096).map((_, i) => 0x80 | (i % 64));
  const { server } = receiver(() => new Response(bytes));
  await using _ = server;
  const response = await postPinned(hookRequest(server.addr.port));

  assert.equal(response.status, 200);
  // Every byte is invalid UTF-8 (U+FFFD, three bytes stored): 341 of them fit.
  assert.equal(response.bodyExcerpt, "\uFFFD".repeat(Math.floor(EXCERPT_BYTES / 3)));
});

Deno.test("postPinned stops reading an endless chunked body", async () => {
  const chunk = new TextEncoder().encode("y".repeat(4096));
  const { server } = receiver(() =>
    new Response(new ReadableStream({ pull: (controller) => controller.enqueue(chunk) }))
  );
  await using _ = server;
  const response = await postPinned(hookRequest(server.addr.port, { timeoutMs: 4_000 }));

  assert.equal(response.status, 200);
  assert.equal(response.bodyExcerpt, "y".repeat(EXCERPT_BYTES));
});

Deno.test("postPinned rejects with the timeout message when the receiver never answers", async () => {
  const release = Promise.withResolvers<void>();
  const { server, seen } = receiver(async () => {
    await release.promise;
    return new Response("late");
  });
  await using _ = server;
  try {
    const started = performance.now();
    const message = await rejection(postPinned(hookRequest(server.addr.port, { timeoutMs: 300 })));
    const elapsed = performance.now() - started;

    assert.equal(message, "timeout after 300 ms");
    assert.ok(elapsed >= 290 && elapsed < 1_500, `took ${elapsed} ms`);
    assert.equal(seen.length, 1);
  } finally {
    release.resolve();
  }
});

Deno.test("postPinned rejects with the timeout message when the TLS handshake stalls", async () => {
  const silent = silentListener();
  try {
    const started = performance.now();
    const message = await rejection(postPinned(hookRequest(silent.port, { timeoutMs: 300 })));
    const elapsed = performance.now() - started;

    assert.equal(message, "timeout after 300 ms");
    assert.ok(elapsed >= 290 && elapsed < 1_500, `took ${elapsed} ms`);
  } finally {
    await silent.release();
  }
});

Deno.test("postPinned releases the socket of a handshake the receiver never answers", async () => {
  const silent = silentListener();
  try {
    for (let i = 0; i < 10; i++) {
      const message = await rejection(postPinned(hookRequest(silent.port, { timeoutMs: 50 })));
      assert.equal(message, "timeout after 50 ms");
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    // The receiver still holds its ten ends. Of ours, only the first attempt's (Deno's TLS) may
    // stay open: the endpoint's next ones went through node:tls (Deno.startTls kept all ten).
    assert.equal(silent.accepted.length, 10);
    const open = await clientSocketsTo(silent.port);
    assert.ok(open <= 1, `${open} of our sockets still open`);
  } finally {
    await silent.release();
  }
});

Deno.test("postPinned rejects with connection refused on a closed port", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  const message = await rejection(postPinned(hookRequest(port)));

  assert.equal(message, "connection refused");
});

Deno.test("postPinned reads a body delimited by the end of the connection", async () => {
  await using server = rawTlsServer(async (conn) => {
    await readRequestHead(conn);
    await writeText(conn, "HTTP/1.1 500 Internal Server Error\r\nX-A: 1\r\nX-A: 2\r\n\r\nbroken");
  });
  const response = await postPinned(hookRequest(server.port));

  assert.equal(response.status, 500);
  assert.equal(response.headers.get("x-a"), "1, 2");
  assert.equal(response.bodyExcerpt, "broken");
});

Deno.test("postPinned skips an interim 103 response", async () => {
  await using server = rawTlsServer(async (conn) => {
    await readRequestHead(conn);
    await writeText(
      conn,
      "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
        "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nokEXTRA",
    );
  });
  const response = await postPinned(hookRequest(server.port));

  assert.equal(response.status, 201);
  assert.equal(response.headers.get("link"), null);
  assert.equal(response.bodyExcerpt, "ok");
});

Deno.test("postPinned rejects a malformed response", async () => {
  const answers = [
    ["SMTP ready\r\n\r\n", "malformed response (bad status line)"],
    ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed response (bad header line)"],
    ["HTTP/1.1 200 OK\r\nX-Cut: ", "malformed response (incomplete headers)"],
    ["", "malformed response (no status line)"],
  ];
  for (const [answer, expected] of answers) {
    await using server = rawTlsServer(async (conn) => {
      await readRequestHead(conn);
      await writeText(conn, answer);
    });
    assert.equal(await rejection(postPinned(hookRequest(server.port))), expected, answer);
  }
});

Deno.test("postPinned keeps the status of a response whose body breaks off or is malformed", async () => {
  const answers: [string, number, string][] = [
    ["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", 200, "short"],
    ["HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n", 204, ""],
    ["HTTP/1.1 201 Created\r\nContent-Length: x\r\n\r\n", 201, ""],
    ["HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\nzz\r\n", 500, "ab"],
  ];
  for (const [answer, status, excerpt] of answers) {
    await using server = rawTlsServer(async (conn) => {
      await readRequestHead(conn);
      await writeText(conn, answer);
    });
    const response = await postPinned(hookRequest(server.port));
    assert.deepEqual(
      [response.status, response.bodyExcerpt, response.bodyComplete],
      [status, excerpt, status === 204],
      answer,
    );
  }
});

Deno.test("postPinned answers with a 2xx that came in time although its body outlasts the deadline", async () => {
  const release = Promise.withResolvers<void>();
  const accepted: number[] = [];
  await using server = rawTlsServer(async (conn) => {
    accepted.push(conn.remoteAddr.port);
    await readRequestHead(conn);
    await writeText(conn, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nx");
    await release.promise;
  });
  const pool = createConnectionPool();
  try {
    const started = performance.now();
    const response = await postPinned(hookRequest(server.port, { pool, timeoutMs: 300 }));
    const elapsed = performance.now() - started;

    assert.deepEqual([response.status, response.bodyExcerpt, response.bodyComplete], [
      200,
      "x",
      false,
    ]);
    assert.ok(elapsed >= 290 && elapsed < 1_500, `took ${elapsed} ms`);
    // The connection, left in the middle of a body, is not given back to the pool.
    release.resolve();
    await postPinned(hookRequest(server.port, { pool, timeoutMs: 300 }));
    assert.equal(accepted.length, 2);
  } finally {
    release.resolve();
    pool.close();
  }
});

Deno.test("postPinned() with a pool does not keep a connection whose response body was malformed", async () => {
  const accepted: number[] = [];
  await using server = rawTlsServer(async (conn) => {
    accepted.push(conn.remoteAddr.port);
    await readRequestHead(conn);
    await writeText(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    // The connection stays open and would answer a next request well.
    while ((await readRequestHead(conn)) !== "") {
      await writeText(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    }
  });
  const pool = createConnectionPool();
  try {
    const first = await postPinned(hookRequest(server.port, { pool }));
    assert.deepEqual([first.status, first.bodyComplete], [200, false]);
    const second = await postPinned(hookRequest(server.port, { pool }));
    assert.equal(second.status, 200);
    assert.equal(accepted.length, 2, "a new connection for the second request");
  } finally {
    pool.close();
  }
});

Deno.test("postPinned() with a pool does not keep a connection that switched protocols (101)", async () => {
  const accepted: number[] = [];
  await using server = rawTlsServer(async (conn) => {
    accepted.push(conn.remoteAddr.port);
    if (accepted.length === 1) {
      await readRequestHead(conn);
      await writeText(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n");
    }
    while ((await readRequestHead(conn)) !== "") {
      await writeText(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    }
  });
  const pool = createConnectionPool();
  try {
    assert.equal((await postPinned(hookRequest(server.port, { pool }))).status, 101);
    assert.equal((await postPinned(hookRequest(server.port, { pool }))).status, 200);
    assert.equal(accepted.length, 2, "a new connection for the second request");
  } finally {
    pool.close();
  }
});

Deno.test("postPinned rejects response headers larger than the read budget", async () => {
  await using server = rawTlsServer(async (conn) => {
    await readRequestHead(conn);
    await writeText(conn, `HTTP/1.1 200 OK\r\nX-Big: ${"b".repeat(70_000)}\r\n\r\n`).catch(
      () => {},
    );
  });
  const message = await rejection(postPinned(hookRequest(server.port)));

  assert.equal(message, "malformed response (headers too large)");
});

Deno.test("postPinned refuses an address that is not an IP literal or a non-https url", async () => {
  assert.equal(
    await rejection(postPinned(hookRequest(1, { address: "localhost" }))),
    "address is not an IP literal: localhost",
  );
  assert.equal(
    await rejection(postPinned(hookRequest(1, { url: new URL("http://hooks.test/") }))),
    "not an https URL",
  );
  assert.equal(
    await rejection(postPinned(hookRequest(1, { headers: { "X-Evil": "a\r\nInjected: 1" } }))),
    'invalid request header: "X-Evil"',
  );
});

Deno.test("postPinned connects to an IPv6 address when the machine has IPv6 loopback", async () => {
  let hasIpv6 = true;
  try {
    Deno.listen({ hostname: "::1", port: 0 }).close();
  } catch {
    hasIpv6 = false;
  }
  if (!hasIpv6) {
    console.log("no IPv6 loopback here: the IPv6 assertions are skipped");
    return;
  }
  const { server, seen } = receiver(() => new Response("v6"), { hostname: "::1" });
  await using _ = server;
  const port = server.addr.port;
  const response = await postPinned(hookRequest(port, { address: "::1" }));

  assert.equal(response.status, 200);
  assert.equal(response.bodyExcerpt, "v6");
  assert.equal(seen[0].host, `hooks.test:${port}`);
  assert.equal(seen[0].remoteAddress, "::1");
});

Deno.test("postPinned() with a pool reuses one keep-alive connection per endpoint", async () => {
  const ports: number[] = [];
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", ...HOOKS, onListen() {} },
    (_request, info) => {
      ports.push(info.remoteAddr.port);
      return new Response("ok");
    },
  );
  const pool = createConnectionPool();
  try {
    for (let i = 0; i < 3; i++) {
      const response = await postPinned(hookRequest(server.addr.port, { pool }));
      assert.equal(response.status, 200);
      assert.equal(response.bodyExcerpt, "ok");
    }
    assert.equal(ports.length, 3);
    assert.equal(new Set(ports).size, 1, "one connection for all three");
  } finally {
    pool.close();
    await server.shutdown();
  }
});

Deno.test("postPinned() with a pool opens a new connection when the idle one was closed", async () => {
  let answered = 0;
  const first = Deno.serve(
    { port: 0, hostname: "127.0.0.1", ...HOOKS, onListen() {} },
    () => new Response(String(++answered)),
  );
  const port = first.addr.port;
  const pool = createConnectionPool();
  try {
    assert.equal((await postPinned(hookRequest(port, { pool }))).bodyExcerpt, "1");
    // The receiver restarts: the pooled connection is dead when it is next used.
    await first.shutdown();
    const second = Deno.serve(
      { port, hostname: "127.0.0.1", ...HOOKS, onListen() {} },
      () => new Response("fresh"),
    );
    try {
      const response = await postPinned(hookRequest(port, { pool }));
      assert.equal(response.bodyExcerpt, "fresh");
    } finally {
      await second.shutdown();
    }
  } finally {
    pool.close();
  }
});

Deno.test("postPinned() with a pool never reads what an idle connection received as an answer", async () => {
  let connections = 0;
  const release = Promise.withResolvers<void>();
  await using server = rawTlsServer(async (conn) => {
    const number = ++connections;
    await readRequestHead(conn);
    await writeText(conn, `HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n${number}`);
    if (number > 1) return;
    // Unasked, while the connection idles in the pool; and it stays open.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await writeText(conn, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n");
    await release.promise;
  });
  const pool = createConnectionPool();
  try {
    assert.equal((await postPinned(hookRequest(server.port, { pool }))).bodyExcerpt, "1");
    await new Promise((resolve) => setTimeout(resolve, 150));
    const second = await postPinned(hookRequest(server.port, { pool }));
    assert.deepEqual([second.status, second.bodyExcerpt], [200, "2"]);
  } finally {
    pool.close();
    release.resolve();
  }
});

Deno.test("postPinned() with a pool opens at most maxOpeningPerKey connections to an endpoint at once", async () => {
  // Handshakes that never complete: every connection accepted stays in its opening.
  const silent = silentListener();
  const pool = createConnectionPool({ maxOpeningPerKey: 2 });
  try {
    const burst = Array.from(
      { length: 5 },
      () => rejection(postPinned(hookRequest(silent.port, { pool, timeoutMs: 3_000 }))),
    );
    // However slowly the first two connect on a busy machine; then time for a third to show.
    await waitUntil(() => silent.accepted.length >= 2, "two connections accepted");
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(silent.accepted.length, 2);
    assert.deepEqual(await Promise.all(burst), Array(5).fill("timeout after 3000 ms"));
  } finally {
    pool.close();
    await silent.release();
  }
});

Deno.test("postPinned() with a pool serves a burst to an endpoint", async () => {
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", ...HOOKS, onListen() {} },
    () => new Response("ok"),
  );
  const pool = createConnectionPool({ maxOpeningPerKey: 2 });
  try {
    const burst = await Promise.all(
      Array.from({ length: 20 }, () => postPinned(hookRequest(server.addr.port, { pool }))),
    );
    assert.deepEqual(burst.map((response) => response.bodyExcerpt), Array(20).fill("ok"));
  } finally {
    pool.close();
    await server.shutdown();
  }
});

Deno.test("postPinned() waiting for a connection of a pool keeps the request's deadline", async () => {
  // The handshake never completes: the first request holds the only opening until its timeout.
  const silent = silentListener();
  const pool = createConnectionPool({ maxOpeningPerKey: 1 });
  try {
    const started = performance.now();
    const messages = await Promise.all(
      [0, 1].map(() => rejection(postPinned(hookRequest(silent.port, { pool, timeoutMs: 200 })))),
    );
    assert.deepEqual(messages, ["timeout after 200 ms", "timeout after 200 ms"]);
    assert.ok(performance.now() - started < 1_000);
  } finally {
    pool.close();
    await silent.release();
  }
});

Deno.test("postPinned() with a pool gives back its opening when a request is refused before it connects", async () => {
  const pool = createConnectionPool({ maxOpeningPerKey: 1 });
  try {
    const plain = hookRequest(9, {
      pool,
      timeoutMs: 10_000,
      url: new URL("http://hooks.test:9/in"),
    });
    for (let i = 0; i < 3; i++) {
      // Refused at once each time, not after waiting out the timeout for the first one's opening.
      const started = performance.now();
      assert.equal(await rejection(postPinned(plain)), "not an https URL");
      assert.ok(performance.now() - started < 5_000);
    }
  } finally {
    pool.close();
  }
});
