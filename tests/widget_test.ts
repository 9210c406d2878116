import assert from "node:assert/strict";
import { capturingErrors } from "./support/console.ts";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { insertApplication } from "../src/db/applications.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { MAX_BODY_BYTES } from "../src/http/middleware/body_size_limit.ts";

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

async function call(
  baseUrl: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; raw?: string; type?: string } = {},
) {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers["content-type"] = options.type ?? "application/json";
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) };
}

async function createVisitor(baseUrl: string, publicId: string) {
  const res = await call(baseUrl, "POST", `/api/v1/widget/${publicId}/visitors`, {
    body: { name: "Ann" },
  });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json.data as { visitor_token: string; client_id: number };
}

async function rowCounts(sql: import("../src/db/client.ts").Sql) {
  const [row] = await sql`SELECT (SELECT count(*) FROM clients) AS clients,
    (SELECT count(*) FROM conversations) AS conversations,
    (SELECT count(*) FROM messages) AS messages`;
  return row;
}

Deno.test("a visitor's messages open one conversation, and a new one after it is closed", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  assert.match(visitor.visitor_token, /^pv_\d+_[0-9a-f]{64}$/);

  const first = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token: visitor.visitor_token,
    body: { content: "Hello" },
  });
  assert.equal(first.status, 200);
  assert.equal(first.json.code, 0);
  const second = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token: visitor.visitor_token,
    body: { content: "Anyone there?", message_type: "text" },
  });
  assert.equal(second.json.data.chat_id, first.json.data.chat_id);

  const history = await call(
    server.baseUrl,
    "GET",
    `/api/v1/widget/messages?chat_id=${first.json.data.chat_id}`,
    { token: visitor.visitor_token },
  );
  assert.equal(history.status, 200);
  assert.deepEqual(history.json.data.map((m: { content: string }) => m.content), [
    "Hello",
    "Anyone there?",
  ]);
  const [message] = history.json.data;
  assert.equal(message.id, first.json.data.message_id);
  assert.equal(message.chat_id, first.json.data.chat_id);
  assert.equal(message.sender_type, "visitor");
  assert.equal(message.message_type, "text");
  assert.match(message.created_at, TIMESTAMP);

  await commitBatch(db.sql, [{
    kind: "chat.close",
    appId: app.id,
    chatId: first.json.data.chat_id,
  }]);
  const third = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token: visitor.visitor_token,
    body: { content: "Back again" },
  });
  assert.notEqual(third.json.data.chat_id, first.json.data.chat_id);
  const latest = await call(server.baseUrl, "GET", "/api/v1/widget/messages", {
    token: visitor.visitor_token,
  });
  assert.deepEqual(latest.json.data.map((m: { content: string }) => m.content), ["Back again"]);
});

Deno.test("bad widget input gets the contract's envelope and writes nothing", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const stranger = await createVisitor(server.baseUrl, other.public_id);
  const strangerChat = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token: stranger.visitor_token,
    body: { content: "mine" },
  });
  const before = await rowCounts(db.sql);
  const token = visitor.visitor_token;
  const cases: [string, Awaited<ReturnType<typeof call>>, number, string][] = [
    [
      "malformed JSON",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", { token, raw: "{nope" }),
      400,
      "Invalid JSON body",
    ],
    [
      // It parses, but names no field.
      "JSON that is not an object",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", { token, raw: "[1]" }),
      400,
      "content is required",
    ],
    [
      "content of the wrong type",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: 5 },
      }),
      400,
      "content is required",
    ],
    [
      "blank content",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: "  \n" },
      }),
      400,
      "content is required",
    ],
    [
      "missing content",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", { token, body: {} }),
      400,
      "content is required",
    ],
    [
      "unknown message type",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: "x", message_type: "card" },
      }),
      400,
      "message_type must be one of: text, image, file",
    ],
    [
      "an image without an https url",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: JSON.stringify({ url: "http://x.example/a.png" }), message_type: "image" },
      }),
      400,
      "content is not valid for message_type image: url must be an https URL",
    ],
    [
      "a message type that is not a string",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: "x", message_type: 5 },
      }),
      400,
      "message_type must be one of: text, image, file",
    ],
    [
      "a visitor body that is not an object",
      await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
        raw: "[1,2,3]",
      }),
      400,
      "Invalid visitor: Invalid input: expected object, received array",
    ],
    [
      "a visitor body of JSON null",
      await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
        raw: "null",
      }),
      400,
      "Invalid visitor: Invalid input: expected object, received null",
    ],
    [
      "an unknown field of a visitor",
      await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
        body: { foo: 1 },
      }),
      400,
      'Invalid visitor: Unrecognized key: "foo"',
    ],
    [
      "a NUL in an application's public id",
      await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}%00/visitors`, {
        body: {},
      }),
      404,
      "Application not found",
    ],
    [
      "content too long",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: "x".repeat(10_001) },
      }),
      400,
      "content is too long (max 10000 characters)",
    ],
    [
      "NUL in content",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: "a\u0000b" },
      }),
      400,
      "content must not contain NUL characters",
    ],
    [
      "NUL in a visitor's name",
      await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
        body: { name: "a\u0000b" },
      }),
      400,
      "Invalid visitor: name must not contain NUL characters",
    ],
    [
      "body over 256 KiB",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        body: { content: "x".repeat(MAX_BODY_BYTES) },
      }),
      413,
      "Request body too large",
    ],
    [
      "form body",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token,
        raw: "content=x",
        type: "application/x-www-form-urlencoded",
      }),
      415,
      "Unsupported content type",
    ],
    [
      "unknown token",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token: `pv_${app.id}_${"0".repeat(64)}`,
        body: { content: "x" },
      }),
      401,
      "Invalid or missing visitor token",
    ],
    [
      "malformed token",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
        token: "nope",
        body: { content: "x" },
      }),
      401,
      "Invalid or missing visitor token",
    ],
    [
      "no token",
      await call(server.baseUrl, "POST", "/api/v1/widget/messages", { body: { content: "x" } }),
      401,
      "Invalid or missing visitor token",
    ],
    [
      "another application's chat",
      await call(
        server.baseUrl,
        "GET",
        `/api/v1/widget/messages?chat_id=${strangerChat.json.data.chat_id}`,
        { token },
      ),
      404,
      "Conversation not found",
    ],
    [
      "a non-numeric chat id",
      await call(server.baseUrl, "GET", "/api/v1/widget/messages?chat_id=abc", { token }),
      404,
      "Conversation not found",
    ],
    [
      "unknown application",
      await call(server.baseUrl, "POST", "/api/v1/widget/app_nope/visitors", { body: {} }),
      404,
      "Application not found",
    ],
    [
      "invalid visitor email",
      await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
        body: { email: "not-an-email" },
      }),
      400,
      "Invalid visitor: email Invalid email address",
    ],
    [
      "unknown route",
      await call(server.baseUrl, "GET", "/api/v1/widget/nothing-here"),
      404,
      "Not found",
    ],
    [
      "wrong method",
      await call(server.baseUrl, "DELETE", "/api/v1/widget/messages", { token }),
      405,
      "Method not allowed",
    ],
  ];
  for (const [name, res, status, message] of cases) {
    assert.equal(res.status, status, `${name}: ${JSON.stringify(res.json)}`);
    assert.deepEqual(res.json, { code: status, message }, name);
    assert.match(res.headers.get("content-type") ?? "", /^application\/json; charset=utf-8/, name);
  }
  assert.deepEqual(await rowCounts(db.sql), before);
});

/** A visitor's socket, open, with the frames it received and its close to come. */
async function openSocket(baseUrl: string, token: string, query = "") {
  const socket = new WebSocket(
    `${baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=${token}${query}`,
  );
  const frames: { type: string; chat_id: number; message?: { content: string } }[] = [];
  socket.onmessage = (event) => frames.push(JSON.parse(event.data));
  const closed = new Promise<CloseEvent>((resolve) => socket.addEventListener("close", resolve));
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  return { socket, frames, closed };
}

Deno.test("a visitor's socket receives its messages as they are committed", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const { socket, frames, closed } = await openSocket(server.baseUrl, visitor.visitor_token);
  try {
    const sent = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
      token: visitor.visitor_token,
      body: { content: "Hi there" },
    });
    for (let i = 0; i < 100 && !frames.some((f) => f.type === "message.created"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const created = frames.find((f) => f.type === "message.created");
    assert.ok(created, JSON.stringify(frames));
    assert.equal(created.chat_id, sent.json.data.chat_id);
    assert.equal(created.message?.content, "Hi there");
  } finally {
    socket.close();
    await closed;
  }
});

Deno.test("a reconnecting socket that names the last time it saw catches up on what came after", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const send = (content: string) =>
    call(server.baseUrl, "POST", "/api/v1/widget/messages", {
      token: visitor.visitor_token,
      body: { content },
    });
  const seen = await send("seen before the drop");
  const history = await call(
    server.baseUrl,
    "GET",
    `/api/v1/widget/messages?chat_id=${seen.json.data.chat_id}`,
    { token: visitor.visitor_token },
  );
  const lastSeen: string = history.json.data.at(-1).created_at;
  await send("missed one");
  await send("missed two");
  // Longer ago than a fresh socket's own catch-up reaches.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const { socket, frames, closed } = await openSocket(
    server.baseUrl,
    visitor.visitor_token,
    `&since=${encodeURIComponent(lastSeen)}`,
  );
  try {
    const contents = () =>
      frames.filter((f) => f.type === "message.created").map((f) => f.message?.content);
    for (let i = 0; i < 100 && !contents().includes("missed two"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(contents().filter((c) => c !== "seen before the drop"), [
      "missed one",
      "missed two",
    ]);
  } finally {
    socket.close();
    await closed;
  }
  const refused = await fetch(
    `${server.baseUrl}/api/v1/widget/socket?token=${visitor.visitor_token}&since=yesterday`,
    { headers: { upgrade: "websocket", connection: "Upgrade", "sec-websocket-version": "13" } },
  );
  assert.deepEqual([refused.status, await refused.json()], [400, {
    code: 400,
    message: "since must be an ISO 8601 time",
  }]);
});

Deno.test("a visitor's socket ignores a small frame from its client and closes on a large one", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const { socket, frames, closed } = await openSocket(server.baseUrl, visitor.visitor_token);
  socket.send("ping");
  socket.send(new Uint8Array(1_024));
  socket.send("é".repeat(512)); // 1,024 bytes
  await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token: visitor.visitor_token,
    body: { content: "Still here" },
  });
  for (let i = 0; i < 100 && !frames.some((f) => f.type === "message.created"); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(frames.some((f) => f.type === "message.created"), "still open after small frames");
  socket.send("é".repeat(513)); // 513 characters, 1,026 bytes
  const late = setTimeout(() => socket.close(4000, "not closed by the server"), 5_000);
  const { code, reason } = await closed;
  clearTimeout(late);
  assert.deepEqual({ code, reason }, {
    code: 1009,
    reason: "Frames from the client are not expected",
  });
});

Deno.test("the socket path without a WebSocket upgrade answers 426", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const res = await call(
    server.baseUrl,
    "GET",
    `/api/v1/widget/socket?token=${visitor.visitor_token}`,
  );
  assert.deepEqual([res.status, res.json], [426, {
    code: 426,
    message: "Expected a WebSocket upgrade",
  }]);
});

/** Sends `head` (a request's lines, without the blank line) over TCP; the answer's status and text. */
async function rawRequest(baseUrl: string, head: string[]) {
  const conn = await Deno.connect({ port: Number(new URL(baseUrl).port) });
  try {
    await conn.write(new TextEncoder().encode([...head, "Connection: close", "", ""].join("\r\n")));
    const text = await new Response(conn.readable).text();
    return { status: Number(text.split(" ")[1]), text };
  } catch (error) {
    conn.close();
    throw error;
  }
}

Deno.test("an incomplete or unsupported WebSocket handshake is refused with a 4xx", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const request = (...headers: string[]) =>
    rawRequest(server.baseUrl, [
      `GET /api/v1/widget/socket?token=${visitor.visitor_token} HTTP/1.1`,
      "Host: localhost",
      "Upgrade: websocket",
      ...headers,
    ]);
  const noKey = await request("Sec-WebSocket-Version: 13");
  assert.equal(noKey.status, 400, noKey.text);
  assert.match(noKey.text, /\{"code":400,"message":"Invalid WebSocket handshake"\}$/);
  const oldVersion = await request(
    "Sec-WebSocket-Version: 8",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
  );
  assert.equal(oldVersion.status, 426, oldVersion.text);
  assert.match(oldVersion.text, /\r\nsec-websocket-version: 13\r\n/i);
  assert.match(oldVersion.text, /"message":"Unsupported WebSocket version"/);
  assert.match(oldVersion.text, /\r\nupgrade: websocket\r\n/i);
  // HEAD is routed like GET, but a handshake is a GET.
  const head = await rawRequest(server.baseUrl, [
    `HEAD /api/v1/widget/socket?token=${visitor.visitor_token} HTTP/1.1`,
    "Host: localhost",
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
  ]);
  assert.equal(head.status, 426, head.text);
});

Deno.test("the widget answers browsers of any origin: preflights, and headers a page may read", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const preflight = await fetch(`${server.baseUrl}/api/v1/widget/messages`, {
    method: "OPTIONS",
    headers: {
      origin: "https://shop.example",
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type",
    },
  });
  await preflight.body?.cancel();
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
  assert.equal(preflight.headers.get("access-control-allow-methods"), "GET, POST");
  assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /Authorization/);
  assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /Content-Type/);
  assert.equal(preflight.headers.get("x-ratelimit-limit"), null, "a preflight counts no hit");
  // An answer, an error too, with the headers the page needs to read it.
  const created = await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
    body: {},
  });
  const refused = await call(server.baseUrl, "POST", "/api/v1/widget/messages", { body: {} });
  for (const res of [created, refused]) {
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    const exposed = res.headers.get("access-control-expose-headers") ?? "";
    for (const name of ["X-RateLimit-Remaining", "Retry-After", "X-Request-Id"]) {
      assert.ok(exposed.includes(name), `${name} in ${exposed}`);
    }
  }
  assert.equal(refused.status, 401);
  // The Open API is for servers: no CORS there.
  const api = await fetch(`${server.baseUrl}/openapi/v1/conversations`);
  await api.body?.cancel();
  assert.equal(api.headers.get("access-control-allow-origin"), null);
});

Deno.test("a known path with a wrong method is 405 and names the methods it takes in Allow", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const cases: [string, string, string, string | undefined][] = [
    ["DELETE", "/api/v1/widget/messages", "GET, HEAD, POST", visitor.visitor_token],
    ["PUT", "/api/v1/widget/actions", "POST", visitor.visitor_token],
    ["POST", "/healthz", "GET, HEAD", undefined],
    ["DELETE", "/readyz", "GET, HEAD", undefined],
    ["DELETE", "/api/v1/whatsapp/webhook/1", "GET, HEAD, POST", undefined],
    ["PUT", "/api/v1/slack/events", "POST", undefined],
  ];
  for (const [method, path, allow, token] of cases) {
    const res = await call(server.baseUrl, method, path, { token });
    assert.deepEqual(
      [res.status, res.json],
      [405, { code: 405, message: "Method not allowed" }],
      path,
    );
    assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
  }
});

Deno.test("the widget reads a chat id as the Open API does: leading zeros allowed", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const token = visitor.visitor_token;
  const sent = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token,
    body: { content: "hello" },
  });
  const chatId = sent.json.data.chat_id;
  const history = await call(server.baseUrl, "GET", `/api/v1/widget/messages?chat_id=00${chatId}`, {
    token,
  });
  assert.equal(history.status, 200, JSON.stringify(history.json));
  assert.deepEqual(history.json.data.map((m: { content: string }) => m.content), ["hello"]);
  const beyond = await call(
    server.baseUrl,
    "GET",
    "/api/v1/widget/messages?chat_id=99999999999999999999",
    {
      token,
    },
  );
  assert.equal(beyond.status, 404);
});

Deno.test("a socket with an unknown token is refused before the upgrade", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const res = await call(
    server.baseUrl,
    "GET",
    "/api/v1/widget/socket?token=pv_1_" + "a".repeat(64),
  );
  assert.equal(res.status, 401);
  assert.equal(res.json.message, "Invalid or missing visitor token");
});

Deno.test("healthz answers while the process runs, readyz while the database answers", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const health = await call(server.baseUrl, "GET", "/healthz");
  assert.deepEqual(health.json, { code: 0, data: { status: "ok" } });
  assert.equal(health.headers.get("content-type"), "application/json; charset=utf-8");
  const ready = await call(server.baseUrl, "GET", "/readyz");
  assert.equal(ready.status, 200);
  assert.ok(ready.headers.get("x-request-id"));
});

/** Waits out the end of the current minute so that a short test stays in one window. */
async function awayFromWindowEdge(sql: import("../src/db/client.ts").Sql) {
  const [row] = await sql`SELECT extract(second FROM clock_timestamp())::float AS s`;
  if (row.s > 50) await new Promise((resolve) => setTimeout(resolve, (61 - row.s) * 1000));
}

Deno.test("widget requests are rate-limited per visitor token and per IP for new visitors", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { WIDGET_RATE_LIMIT_PER_MINUTE: "3" });
  const app = await insertApplication(db.sql, "Acme");
  await awayFromWindowEdge(db.sql);
  const a = await createVisitor(server.baseUrl, app.public_id);
  const b = await createVisitor(server.baseUrl, app.public_id);
  const statuses: number[] = [];
  let last: Awaited<ReturnType<typeof call>> | null = null;
  for (let i = 0; i < 4; i++) {
    last = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
      token: a.visitor_token,
      body: { content: `m${i}` },
    });
    statuses.push(last.status);
  }
  assert.deepEqual(statuses, [200, 200, 200, 429]);
  assert.deepEqual(last!.json, { code: 429, message: "Rate limit exceeded" });
  const retryAfter = Number(last!.headers.get("retry-after"));
  assert.ok(retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
  assert.equal(last!.headers.get("x-ratelimit-remaining"), "0");
  assert.equal(last!.headers.get("x-ratelimit-limit"), "3");
  // Another visitor has its own bucket.
  const other = await call(server.baseUrl, "POST", "/api/v1/widget/messages", {
    token: b.visitor_token,
    body: { content: "hi" },
  });
  assert.equal(other.status, 200);
  assert.equal(other.headers.get("x-ratelimit-remaining"), "2");
  // A token that the route does not authenticate with buys no bucket of its own.
  const sideToken = await call(server.baseUrl, "POST", "/api/v1/widget/messages?token=made-up", {
    token: a.visitor_token,
    body: { content: "again" },
  });
  assert.equal(sideToken.status, 429);
  // Two visitors were created from this IP; the third creation is allowed, the fourth not, and
  // a token sent along (visitor creation takes none) changes nothing.
  const third = await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
    token: "made-up-1",
  });
  const fourth = await call(server.baseUrl, "POST", `/api/v1/widget/${app.public_id}/visitors`, {
    token: "made-up-2",
  });
  assert.deepEqual([third.status, fourth.status], [200, 429]);
  const [messages] = await db.sql`SELECT count(*) AS n FROM messages`;
  assert.equal(messages.n, 4);
});

/** Connections to `port` in CLOSE-WAIT: closed by the peer, still held open here (Linux). */
async function closeWaitCount(port: number): Promise<number> {
  let count = 0;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const text = await Deno.readTextFile(table).catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (local && parseInt(local.split(":")[1], 16) === port && state === "08") count++;
    }
  }
  return count;
}

Deno.test("a socket whose client leaves during the token lookup holds no connection open", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const port = Number(new URL(server.baseUrl).port);
  // Fresh tokens: none is cached yet, so each socket needs the database to know its visitor.
  const visitors = await Promise.all(
    Array.from({ length: 20 }, () => createVisitor(server.baseUrl, app.public_id)),
  );
  for (const visitor of visitors) {
    const conn = await Deno.connect({ port });
    await conn.write(new TextEncoder().encode([
      `GET /api/v1/widget/socket?token=${visitor.visitor_token} HTTP/1.1`,
      "Host: localhost",
      "Upgrade: websocket",
      "Connection: Upgrade",
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
      "Sec-WebSocket-Version: 13",
      "",
      "",
    ].join("\r\n")));
    conn.close();
  }
  let held = await closeWaitCount(port);
  for (let i = 0; i < 50 && held > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    held = await closeWaitCount(port);
  }
  assert.equal(held, 0, "connections the clients closed are still held by the server");
});

Deno.test("a socket whose token cannot be looked up is closed with 1011, and the next one works", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const visitor = await createVisitor(server.baseUrl, app.public_id);
  const open = () =>
    new WebSocket(
      `${server.baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=${visitor.visitor_token}`,
    );
  // The lookup's table gone for a moment: the database fails the statement.
  await db.sql`ALTER TABLE client_identities RENAME TO client_identities_away`;
  let closed: CloseEvent;
  try {
    await capturingErrors(async () => {
      const socket = open();
      closed = await new Promise<CloseEvent>((resolve) => socket.onclose = resolve);
    });
  } finally {
    await db.sql`ALTER TABLE client_identities_away RENAME TO client_identities`;
  }
  assert.deepEqual({ code: closed!.code, reason: closed!.reason }, {
    code: 1011,
    reason: "Internal server error",
  });
  const { socket, closed: done } = await openSocket(server.baseUrl, visitor.visitor_token);
  socket.close();
  await done;
});

Deno.test("a socket with a well-formed unknown token is closed with 1008 and the reason", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const socket = new WebSocket(
    `${server.baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=pv_1_${"a".repeat(64)}`,
  );
  const closed = await new Promise<CloseEvent>((resolve) => socket.onclose = resolve);
  assert.equal(closed.code, 1008);
  assert.equal(closed.reason, "Invalid or missing visitor token");
});
