import assert from "node:assert/strict";
import { createMediaLinks } from "../src/channels/media_links.ts";
import { createTestDatabase } from "./support/database.ts";
import { startPgProxy } from "./support/pg_proxy.ts";
import { spawnServer, startTestServer, TEST_ENCRYPTION_KEY } from "./support/server.ts";
import { startParley } from "../src/server.ts";
import { loadConfig } from "../src/config.ts";
import { createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import { connect } from "../src/db/client.ts";
import { createHttpApp } from "../src/http/app.ts";
import { createConversationListCache } from "../src/cache/conversation_lists.ts";
import { createSecretBox } from "../src/crypto/secret_box.ts";
import { freePort } from "../src/db/embedded.ts";
import { checkEncryptionKey } from "../src/db/key_check.ts";
import { guardedOutcome } from "./support/guarded_thread.ts";

Deno.test("every request logs one JSON line without its query string", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const server = await spawnServer({ DATABASE_URL: db.url });
  try {
    // A streamed (chunked) body, which the body limit reads and hands on.
    const chunks = ReadableStream.from([new TextEncoder().encode('{"name":"Ana"}')]);
    const visitor = await fetch(`${server.baseUrl}/api/v1/widget/${app.publicId}/visitors`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chunks,
    });
    assert.equal(visitor.status, 200);
    await visitor.body?.cancel();
    const secret = `pv_1_${"ab".repeat(32)}`;
    const res = await fetch(`${server.baseUrl}/api/v1/widget/socket?token=${secret}`, {
      headers: { "x-request-id": "req-123" },
    });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get("x-request-id"), "req-123");
    await res.body?.cancel();
    const health = await fetch(`${server.baseUrl}/healthz`);
    await health.body?.cancel();
    for (let i = 0; i < 50 && !server.lines.some((l) => l.includes('"/healthz"')); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    assert.equal((await server.stop()).code, 0);
  }
  const requests = server.lines.map((line) => JSON.parse(line)).filter((l) => l.msg === "request");
  assert.equal(requests.length, 3, server.lines.join("\n"));
  const [, socket, health] = requests;
  assert.equal(socket.method, "GET");
  assert.equal(socket.path, "/api/v1/widget/socket");
  assert.equal(socket.status, 401);
  assert.equal(socket.request_id, "req-123");
  assert.equal(typeof socket.duration_ms, "number");
  assert.equal(health.path, "/healthz");
  assert.match(health.request_id, /^[0-9a-f-]{36}$/);
  assert.ok(!server.lines.join("\n").includes("abab"), "no token in the log");
  const last = JSON.parse(server.lines.at(-1)!);
  assert.equal(last.msg, "stopped");
  // Nothing but the log: Deno warns on stderr when a served request's signal was read.
  assert.equal(await server.stderr, "");
});

Deno.test("the HTTP app renders a failing readyz as 503 in the envelope, and HEAD the length of GET", async () => {
  const port = await freePort();
  const sql = connect(`postgres://nobody:x@127.0.0.1:${port}/none`, { max: 1 });
  try {
    const app = createHttpApp({
      sql,
      ask: () => Promise.reject(new Error("unused")),
      attachVisitor: () => {},
      hitCounter: { hit: () => Promise.resolve({ count: 1, resetAt: 0 }) },
      widgetRateLimit: 600,
      trustProxy: false,
      findApiKey: () => Promise.resolve(null),
      apiHitCounter: { hit: () => Promise.resolve({ count: 1, resetAt: 0 }) },
      rateLimitPerMinute: 120,
      publicBaseUrl: "http://localhost",
      listings: createConversationListCache({ load: () => Promise.resolve([]) }),
      secretBox: createSecretBox(new Uint8Array(32)),
      checkWebhookUrl: () => Promise.resolve(),
      wakeDeliveries: () => {},
      inbound: { process: () => Promise.resolve() },
      mediaLinks: createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "" }),
      whatsappGraphUrl: "http://127.0.0.1:9",
      slackInbound: { process: () => Promise.resolve() },
      slackMediaLinks: createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "" }),
      slackClients: () => {
        throw new Error("unused");
      },
      slackMediaClients: () => {
        throw new Error("unused");
      },
      slack: {
        clientId: null,
        clientSecret: null,
        signingSecret: null,
        apiUrl: "http://127.0.0.1:9/api/",
        authorizeUrl: "http://127.0.0.1:9/authorize",
      },
    });
    const res = await app.request("/readyz");
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { code: 503, message: "Database unavailable" });
    const health = await app.request("/healthz");
    assert.equal(health.status, 200);
    // HEAD tells the length GET sends (RFC 9110 §8.6), never 0.
    const length = new TextEncoder().encode(await health.text()).byteLength;
    const head = await app.request("/healthz", { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-length"), String(length));
    assert.equal(head.body, null);
  } finally {
    await sql.end();
  }
});

Deno.test("an instance given another encryption key than its database's secrets refuses to start", async () => {
  await using db = await createTestDatabase();
  const box = createSecretBox(new Uint8Array(32).fill(1));
  await checkEncryptionKey(db.sql, box);
  await checkEncryptionKey(db.sql, createSecretBox(new Uint8Array(32).fill(1)));
  await assert.rejects(
    checkEncryptionKey(db.sql, createSecretBox(new Uint8Array(32).fill(2))),
    /the encryption key is not the one this database's secrets were sealed with/,
  );
  // The server checks at start: with the test key against a database sealed with another, it
  // exits 1 and says why.
  const child = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../main.ts", import.meta.url).pathname],
    env: {
      DATABASE_URL: db.url,
      PORT: "0",
      WORKERS: "1",
      PARLEY_ENCRYPTION_KEY: btoa(String.fromCharCode(...new Uint8Array(32).fill(3))),
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(child.code, 1);
  assert.match(new TextDecoder().decode(child.stderr), /encryption key is not the one/);
});

Deno.test("a database whose secrets were sealed before the key check existed refuses another key", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const sealedWith = createSecretBox(new Uint8Array(32).fill(1));
  // As a database migrated from before key_check: a secret sealed, no check.
  await db.sql`
    INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.appId}, 'https://example.com/hook', '{}', true, ${sealedWith.seal("whsec_x")})`;
  await assert.rejects(
    checkEncryptionKey(db.sql, createSecretBox(new Uint8Array(32).fill(2))),
    /the encryption key is not the one this database's secrets were sealed with/,
  );
  const [check] = await db.sql`SELECT count(*)::int AS n FROM key_check`;
  assert.equal(check.n, 0, "the wrong key sealed no check");
  await checkEncryptionKey(db.sql, createSecretBox(new Uint8Array(32).fill(1)));
  await assert.rejects(
    checkEncryptionKey(db.sql, createSecretBox(new Uint8Array(32).fill(2))),
    /the encryption key is not the one/,
  );
});

Deno.test("a stop lets a request whose body is still arriving finish, and refuses new ones meanwhile", async () => {
  await using db = await createTestDatabase();
  const server = await startTestServer(db.url, { LOG_LEVEL: "silent" });
  try {
    const app = await createKeyedApp(db.sql);
    const chat = await createVisitorChat(server.baseUrl, app.publicId);
    const encoder = new TextEncoder();
    const rest = Promise.withResolvers<void>();
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(encoder.encode(`{"chat_id":${chat.chatId},"content":"`));
        await rest.promise;
        controller.enqueue(encoder.encode(`Sent while stopping"}`));
        controller.close();
      },
    });
    const upload = fetch(`${server.baseUrl}/openapi/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body,
    });
    // The Open API counts a request before it reads the body: then it is in its handler.
    for (let tries = 0;; tries++) {
      const [{ n }] = await db.sql`
        SELECT count(*)::int AS n FROM rate_limits WHERE bucket LIKE 'api:%'`;
      if (n > 0) break;
      assert.ok(tries < 100, "the upload never reached its handler");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const stopped = server.parley.stop();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Alive while it stops (CONTRACT §1), no longer ready for traffic.
    const alive = await fetch(`${server.baseUrl}/healthz`);
    assert.equal(alive.status, 200);
    assert.deepEqual(await alive.json(), { code: 0, data: { status: "ok" } });
    const meanwhile = await fetch(`${server.baseUrl}/readyz`);
    assert.equal(meanwhile.status, 503);
    assert.equal((await meanwhile.json()).message, "Shutting down");
    assert.ok(meanwhile.headers.get("x-request-id"), "refused by the app: logged, with an id");
    const unknown = await fetch(`${server.baseUrl}/nowhere`);
    assert.equal(unknown.status, 503);
    assert.equal((await unknown.json()).message, "Shutting down");
    // The Open API's refusal still carries the rate-limit headers (CONTRACT §2.1), the widget's
    // its CORS and rate-limit headers too, and neither reads the request.
    const listing = await fetch(`${server.baseUrl}/openapi/v1/conversations`, {
      headers: { authorization: `Bearer ${app.key}` },
    });
    assert.equal(listing.status, 503);
    assert.deepEqual(await listing.json(), { code: 503, message: "Shutting down" });
    assert.equal(listing.headers.get("connection"), "close");
    assert.equal(listing.headers.get("x-ratelimit-limit"), "120");
    assert.match(listing.headers.get("x-ratelimit-remaining") ?? "", /^\d+$/);
    assert.match(listing.headers.get("ratelimit") ?? "", /^"default";r=\d+;t=\d+$/);
    const visitor = await fetch(`${server.baseUrl}/api/v1/widget/${app.publicId}/visitors`, {
      method: "POST",
      headers: { origin: "https://shop.example", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(visitor.status, 503);
    assert.equal((await visitor.json()).message, "Shutting down");
    assert.equal(visitor.headers.get("access-control-allow-origin"), "*");
    assert.ok(visitor.headers.get("x-ratelimit-limit"));
    rest.resolve();
    const answer = await upload;
    assert.equal(answer.status, 200, await answer.clone().text());
    const { data } = await answer.json();
    await stopped;
    const [row] = await db.sql`SELECT content FROM messages WHERE id = ${data.message_id}`;
    assert.equal(row.content, "Sent while stopping");
  } finally {
    await server.parley.stop();
  }
});

Deno.test("a second stop signal ends an instance whose database stopped answering", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  let frozen = false;
  const proxy = startPgProxy(db.url, () => frozen ? "hold" : "pass");
  try {
    const server = await spawnServer({ DATABASE_URL: proxy.url });
    frozen = true;
    // A request that waits on the database, which keeps the stop waiting behind it.
    const waiting = fetch(`${server.baseUrl}/openapi/v1/conversations`, {
      headers: { authorization: `Bearer ${app.key}` },
    }).then((res) => res.body?.cancel(), () => {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.process.kill("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.process.kill("SIGTERM");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([
      server.process.status,
      new Promise<"still running">((resolve) =>
        timer = setTimeout(resolve, 8_000, "still running")
      ),
    ]);
    clearTimeout(timer);
    if (outcome === "still running") server.process.kill("SIGKILL");
    assert.notEqual(outcome, "still running", "the second signal ended it");
    assert.equal((outcome as Deno.CommandStatus).code, 1);
    // Errors are logged on stderr.
    const forced = (await server.stderr).split("\n").filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line))
      .find((line) => line.msg === "stopping without waiting any longer");
    assert.equal(forced?.reason, "a second signal");
    await waiting;
  } finally {
    proxy.close();
  }
});

Deno.test("a thread outlives a connection lost during its first array-type lookup", async () => {
  await using db = await createTestDatabase();
  // postgres.js looks the array types up on a connection's first query and left its failure
  // unhandled: PostgreSQL ending the connection then (a restart, pg_terminate_backend) ended the
  // process. The vendored driver handles it (vendor/postgres/PARLEY.md, 5), guards or not.
  let breaks = 1;
  const proxy = startPgProxy(
    db.url,
    (text, broken) => broken < breaks && text.includes("typarray") ? "terminate" : "pass",
  );
  try {
    const request = { how: "type-lookup", url: proxy.url } as const;
    assert.equal(await guardedOutcome({ ...request, guard: "none" }), "alive");
    assert.equal(proxy.broken, 1);
    breaks = 2;
    assert.equal(await guardedOutcome({ ...request, guard: "main" }), "alive");
    assert.equal(proxy.broken, 2);
  } finally {
    proxy.close();
  }
});

Deno.test("a start against something that takes connections but speaks no PostgreSQL fails instead of hanging", async () => {
  // It reads the startup packet and hangs up, as an HTTP server or a proxy to nowhere does.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const serving = (async () => {
    for await (const conn of listener) {
      accepted++;
      await conn.read(new Uint8Array(1024)).catch(() => null);
      conn.close();
    }
  })();
  const { port } = listener.addr as Deno.NetAddr;
  const started = performance.now();
  await assert.rejects(
    startParley(
      loadConfig({
        DATABASE_URL: `postgres://x:y@127.0.0.1:${port}/db`,
        PORT: "0",
        WORKERS: "1",
        LOG_LEVEL: "silent",
        PARLEY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      }),
      { firstContactMs: 1_500 },
    ),
    { message: "Cannot reach the database: nothing answered as PostgreSQL within 1.5 s" },
  );
  assert.ok(performance.now() - started < 10_000);
  assert.ok(accepted >= 1);
  // The pool ended with the start: once a connection under way has landed, none comes after
  // (connecting again at once, it made hundreds a second).
  await new Promise((resolve) => setTimeout(resolve, 200));
  const after = accepted;
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  assert.equal(accepted, after);
  listener.close();
  await serving.catch(() => {});
});

Deno.test("a request the database leaves unanswered is answered 500 at its deadline, with its headers", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  // A database that froze, for the statement that reads a conversation's messages only.
  const proxy = startPgProxy(
    db.url,
    (text) => text.includes("FROM messages") && text.includes("ORDER BY id DESC") ? "hold" : "pass",
  );
  try {
    await using server = await startTestServer(proxy.url, {}, { requestDeadlineMs: 400 });
    const chat = await createVisitorChat(server.baseUrl, app.publicId, "Hello");

    const listed = await fetch(
      `${server.baseUrl}/openapi/v1/conversations/${chat.chatId}/messages`,
      // Without the deadline it would wait forever: fail instead.
      { headers: { authorization: `Bearer ${app.key}` }, signal: AbortSignal.timeout(10_000) },
    );
    assert.equal(listed.status, 500);
    assert.deepEqual(await listed.json(), { code: 500, message: "Internal server error" });
    assert.equal(listed.headers.get("x-ratelimit-limit"), "120", "the rate limit's headers");
    assert.ok(listed.headers.get("x-request-id"));

    const history = await fetch(
      `${server.baseUrl}/api/v1/widget/messages?chat_id=${chat.chatId}`,
      {
        headers: { authorization: `Bearer ${chat.token}`, origin: "https://shop.example" },
        signal: AbortSignal.timeout(10_000),
      },
    );
    assert.equal(history.status, 500);
    assert.deepEqual(await history.json(), { code: 500, message: "Internal server error" });
    assert.equal(history.headers.get("access-control-allow-origin"), "*", "readable by the page");

    // What the database still answers is served as before.
    const conversations = await fetch(`${server.baseUrl}/openapi/v1/conversations`, {
      headers: { authorization: `Bearer ${app.key}` },
    });
    assert.equal(conversations.status, 200);
    assert.equal((await conversations.json()).data.length, 1);
  } finally {
    proxy.close();
  }
});
