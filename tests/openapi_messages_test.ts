import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import { waitUntil } from "./support/realtime.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { sweepIdempotencyKeys } from "../src/db/idempotency_keys.ts";
import { MAX_BODY_BYTES } from "../src/http/middleware/body_size_limit.ts";
import type { Sql } from "../src/db/client.ts";

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

async function messageCount(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM messages`;
  return row.n;
}

/** A visitor socket that records its frames. */
async function openSocket(baseUrl: string, token: string) {
  const socket = new WebSocket(
    `${baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=${token}`,
  );
  // deno-lint-ignore no-explicit-any
  const frames: any[] = [];
  socket.onmessage = (event) => frames.push(JSON.parse(event.data));
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  return {
    frames,
    async [Symbol.asyncDispose]() {
      const closed = new Promise((resolve) => socket.onclose = resolve);
      socket.close();
      await closed;
    },
  };
}

Deno.test("POST /messages stores a bot message, answers after commit and pushes it to the visitor", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  await using socket = await openSocket(server.baseUrl, chat.token);

  const res = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content: "How can I help?" },
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
  assert.deepEqual(Object.keys(res.json.data), ["message_id"]);
  const messageId = res.json.data.message_id;
  assert.ok(Number.isInteger(messageId) && messageId > chat.messageId);

  // Committed before the answer: visible to a new connection at once.
  const [row] = await db.sql`
    SELECT conversation_id, sender_type, message_type, content, payload, internal
    FROM messages WHERE id = ${messageId}`;
  assert.deepEqual({ ...row }, {
    conversation_id: chat.chatId,
    sender_type: "bot",
    message_type: "text",
    content: "How can I help?",
    payload: null,
    internal: false,
  });

  await waitUntil(
    () => socket.frames.some((f) => f.type === "message.created" && f.message.id === messageId),
    "the reply on the visitor's socket",
  );
  const frame = socket.frames.find((f) => f.message?.id === messageId);
  assert.equal(frame.chat_id, chat.chatId);
  assert.equal(frame.message.sender_type, "bot");
  assert.equal(frame.message.content, "How can I help?");
  assert.match(frame.message.created_at, TIMESTAMP);

  const [conversation] = await db.sql`
    SELECT to_char(last_message_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last
    FROM conversations WHERE id = ${chat.chatId}`;
  assert.equal(conversation.last, frame.message.created_at, "activity moves to the reply");
});

Deno.test("POST /messages takes JSON and form bodies, chat_id as a number or a digit string", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const bodies: { json?: unknown; form?: Record<string, string> }[] = [
    { json: { chat_id: chat.chatId, content: "json number" } },
    { json: { chat_id: String(chat.chatId), content: "json string", message_type: "text" } },
    { json: { chat_id: chat.chatId, content: "**bold**", message_type: "markdown" } },
    { json: { chat_id: `00${chat.chatId}`, content: "leading zeros" } },
    { form: { chat_id: String(chat.chatId), content: "form encoded & more" } },
    { form: { chat_id: String(chat.chatId), content: "_it_", message_type: "markdown" } },
  ];
  for (const body of bodies) {
    const res = await apiCall(server.baseUrl, "/messages", { key: app.key, ...body });
    assert.equal(res.status, 200, JSON.stringify(res.json));
  }
  const rows = await db.sql`
    SELECT content, message_type FROM messages WHERE sender_type = 'bot' ORDER BY id`;
  assert.deepEqual(rows.map((r) => [r.content, r.message_type]), [
    ["json number", "text"],
    ["json string", "text"],
    ["**bold**", "markdown"],
    ["leading zeros", "text"],
    ["form encoded & more", "text"],
    ["_it_", "markdown"],
  ]);
  const charset = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    headers: { "content-type": "application/json; charset=utf-8" },
    raw: JSON.stringify({ chat_id: chat.chatId, content: "with charset" }),
    method: "POST",
  });
  assert.equal(charset.status, 200);
  // Characters, not UTF-16 units: 10,000 emoji are 10,000 characters.
  const emoji = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content: "😀".repeat(10_000) },
  });
  assert.equal(emoji.status, 200, JSON.stringify(emoji.json));
  const stored = await db.sql`
    SELECT char_length(content) AS n FROM messages WHERE id = ${emoji.json.data.message_id}`;
  assert.equal(stored[0].n, 10_000);
});

Deno.test("POST /messages stores a rich message with its parsed payload", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const document = { text: "Pick one", buttons: [{ id: "sales", title: "Sales" }] };
  const res = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content: JSON.stringify(document), message_type: "buttons" },
  });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  const history = await apiCall(server.baseUrl, `/conversations/${chat.chatId}/messages`, {
    key: app.key,
  });
  const stored = history.json.data.at(-1);
  assert.equal(stored.message_type, "buttons");
  assert.equal(stored.content, JSON.stringify(document));
  assert.deepEqual(stored.payload, document);
});

Deno.test("POST /messages stores lone surrogates in rich content as U+FFFD and refuses a body that is not UTF-8", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const content = String.raw`{"text":"hi \ud800","buttons":[{"id":"a","title":"A \udc00"}]}`;
  const res = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content, message_type: "buttons" },
  });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  const [stored] = await db
    .sql`SELECT payload FROM messages WHERE id = ${res.json.data.message_id}`;
  assert.deepEqual(stored.payload, {
    text: "hi \ufffd",
    buttons: [{ id: "a", title: "A \ufffd" }],
  });

  const before = await messageCount(db.sql);
  const bytes = new Uint8Array([
    ...new TextEncoder().encode(`{"chat_id":${chat.chatId},"content":"a`),
    0xff,
    0xfe,
    ...new TextEncoder().encode(`"}`),
  ]);
  const refused = await fetch(`${server.baseUrl}/openapi/v1/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
    body: bytes,
  });
  assert.equal(refused.status, 400);
  assert.deepEqual(await refused.json(), { code: 400, message: "Invalid JSON body" });
  assert.equal(await messageCount(db.sql), before);
});

Deno.test("POST /messages answers every error row of the contract and writes nothing", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const id = chat.chatId;
  const required = "chat_id and content are required";
  const notFound = "Conversation not found";
  const types =
    "message_type must be one of: text, markdown, card, buttons, carousel, form, image, file, template";
  const json = "application/json";
  const cases: [string, { body: string; type: string }, number, string][] = [
    ["no chat_id", body({ content: "hi" }), 400, required],
    ["chat_id null", body({ chat_id: null, content: "hi" }), 400, required],
    ["chat_id 0", body({ chat_id: 0, content: "hi" }), 400, required],
    ["chat_id negative", body({ chat_id: -1, content: "hi" }), 400, required],
    ["chat_id fraction", body({ chat_id: 1.5, content: "hi" }), 400, required],
    ["chat_id word", body({ chat_id: "abc", content: "hi" }), 400, required],
    ["chat_id signed", body({ chat_id: "+1", content: "hi" }), 400, required],
    ["chat_id zeros", body({ chat_id: "000", content: "hi" }), 400, required],
    ["chat_id beyond ours", body({ chat_id: "99999999999999999", content: "hi" }), 404, notFound],
    ["chat_id number beyond 2^53", body({ chat_id: 2 ** 60, content: "hi" }), 404, notFound],
    ["chat_id array", body({ chat_id: [id], content: "hi" }), 400, required],
    // Judged by the JSON text, not by the double it rounds to (which is this conversation's id).
    [
      "chat_id a hair under the id",
      { body: `{"chat_id":${id - 1}.99999999999999999,"content":"hi"}`, type: json },
      400,
      required,
    ],
    [
      "chat_id a hair over the id",
      { body: `{"chat_id":${id}.0000000000000001,"content":"hi"}`, type: json },
      400,
      required,
    ],
    ["chat_id 1e400", { body: '{"chat_id":1e400,"content":"hi"}', type: json }, 404, notFound],
    ["no content", body({ chat_id: id }), 400, required],
    ["blank content", body({ chat_id: id, content: " \n\t " }), 400, required],
    ["content number", body({ chat_id: id, content: 5 }), 400, required],
    ["form without content", form({ chat_id: String(id) }), 400, required],
    ["form blank chat_id", form({ chat_id: "", content: "hi" }), 400, required],
    [
      "form escapes that make no UTF-8",
      { body: `chat_id=${id}&content=%FF%FE`, type: "application/x-www-form-urlencoded" },
      400,
      "Invalid JSON body",
    ],
    ["unknown type", body({ chat_id: id, content: "hi", message_type: "gif" }), 400, types],
    ["null type", body({ chat_id: id, content: "hi", message_type: null }), 400, types],
    [
      "invalid rich content",
      body({
        chat_id: id,
        content: JSON.stringify({ text: "x", buttons: [] }),
        message_type: "buttons",
      }),
      400,
      "content is not valid for message_type buttons: buttons must have 1 to 10 items",
    ],
    [
      "rich content not JSON",
      body({ chat_id: id, content: "not json", message_type: "card" }),
      400,
      "content is not valid for message_type card: not a JSON document",
    ],
    [
      "content too long",
      body({ chat_id: id, content: "x".repeat(10_001) }),
      400,
      "content is too long (max 10000 characters)",
    ],
    [
      "content too long in characters",
      body({ chat_id: id, content: "😀".repeat(10_001) }),
      400,
      "content is too long (max 10000 characters)",
    ],
    [
      "NUL in content",
      body({ chat_id: id, content: "a\u0000b" }),
      400,
      "content must not contain NUL characters",
    ],
    ["broken JSON", { body: '{"chat_id":', type: json }, 400, "Invalid JSON body"],
    // A body that parses but is no object names neither field.
    ["JSON array", { body: "[1]", type: json }, 400, required],
    ["JSON null", { body: "null", type: json }, 400, required],
    [
      "body nested too deeply",
      {
        body: `{"chat_id":${id},"content":"hi","x":${"[".repeat(65)}${"]".repeat(65)}}`,
        type: json,
      },
      400,
      "Invalid JSON body",
    ],
    [
      "object type",
      body({ chat_id: id, content: "hi", message_type: { toString: 1 } }),
      400,
      types,
    ],
    ["array type", body({ chat_id: id, content: "hi", message_type: ["text"] }), 400, types],
    [
      "rich content nested too deeply",
      body({
        chat_id: id,
        message_type: "template",
        content: `{"name":"n","language":"en","components":[{"a":${"[".repeat(4_950)}${
          "]".repeat(4_950)
        }}]}`,
      }),
      400,
      "content is not valid for message_type template: nested more than 64 levels deep",
    ],
    ["empty JSON body", { body: "", type: json }, 400, "Invalid JSON body"],
    ["text/plain", { body: "hi", type: "text/plain" }, 415, "Unsupported content type"],
    ["no content type", { body: "hi", type: "" }, 415, "Unsupported content type"],
    [
      "body over 256 KiB",
      body({ chat_id: id, content: "x".repeat(MAX_BODY_BYTES) }),
      413,
      "Request body too large",
    ],
    ["unknown chat", body({ chat_id: 999999, content: "hi" }), 404, "Conversation not found"],
    [
      "unknown chat as string",
      form({ chat_id: "999999", content: "hi" }),
      404,
      "Conversation not found",
    ],
  ];
  const before = await messageCount(db.sql);
  for (const [name, request, status, message] of cases) {
    const headers: Record<string, string> = request.type ? { "content-type": request.type } : {};
    const res = await apiCall(server.baseUrl, "/messages", {
      key: app.key,
      method: "POST",
      headers,
      raw: request.body,
    });
    assert.equal(res.status, status, `${name}: ${JSON.stringify(res.json)}`);
    assert.deepEqual(res.json, { code: status, message }, name);
    assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8", name);
  }
  assert.equal(await messageCount(db.sql), before, "nothing written");
});

function body(value: unknown) {
  return { body: JSON.stringify(value), type: "application/json" };
}

function form(value: Record<string, string>) {
  return { body: new URLSearchParams(value).toString(), type: "application/x-www-form-urlencoded" };
}

Deno.test("a reply to a closed conversation is delivered and reopens it", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  await using socket = await openSocket(server.baseUrl, chat.token);
  await commitBatch(db.sql, [{ kind: "chat.close", appId: app.appId, chatId: chat.chatId }]);
  const closed = await apiCall(server.baseUrl, `/conversations/${chat.chatId}`, { key: app.key });
  assert.equal(closed.json.data.status, "closed");

  const res = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    form: { chat_id: String(chat.chatId), content: "We are back" },
  });
  assert.equal(res.status, 200);
  const reopened = await apiCall(server.baseUrl, `/conversations/${chat.chatId}`, {
    key: app.key,
  });
  assert.equal(reopened.json.data.status, "open");
  await waitUntil(
    () =>
      socket.frames.some((f) =>
        f.type === "message.created" && f.message.id === res.json.data.message_id
      ) &&
      socket.frames.some((f) => f.type === "chat.updated" && f.chat?.status === "open"),
    "the reply and the reopened chat on the socket",
  );
  const [row] = await db.sql`SELECT closed_at FROM conversations WHERE id = ${chat.chatId}`;
  assert.equal(row.closed_at, null);

  // The visitor's next message goes into the reopened conversation, not a new one.
  const next = await fetch(`${server.baseUrl}/api/v1/widget/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${chat.token}`, "content-type": "application/json" },
    body: JSON.stringify({ content: "great" }),
  });
  assert.equal((await next.json()).data.chat_id, chat.chatId);
});

Deno.test("a reply to a closed conversation reopens it even after its visitor opened a newer one", async () => {
  // CONTRACT §2.4, to the letter: "An agent or API reply to a closed conversation is stored and
  // delivered, and reopens it." The client then has two open conversations on the channel; the
  // visitor's messages go to the newer.
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  await commitBatch(db.sql, [{ kind: "chat.close", appId: app.appId, chatId: chat.chatId }]);
  const send = (content: string) =>
    fetch(`${server.baseUrl}/api/v1/widget/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${chat.token}`, "content-type": "application/json" },
      body: JSON.stringify({ content }),
    }).then((res) => res.json());
  const newer: number = (await send("Me again")).data.chat_id;
  assert.notEqual(newer, chat.chatId);
  const reply = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content: "About your first question" },
  });
  assert.equal(reply.status, 200);
  const statuses = await db.sql`
    SELECT id, status FROM conversations WHERE client_id = ${chat.clientId} ORDER BY id`;
  assert.deepEqual(statuses.map((row) => [row.id, row.status]), [
    [chat.chatId, "open"],
    [newer, "open"],
  ]);
  assert.equal((await send("Thanks")).data.chat_id, newer);
});

Deno.test("POST /messages queues message.sent for a subscribed webhook in the same transaction", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const send = (content: string) =>
    apiCall(server.baseUrl, "/messages", { key: app.key, json: { chat_id: chat.chatId, content } });
  await send("before subscribing");
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.appId}, 'https://example.com/hook', '{message.sent}', true, 'v1:x:y')`;
  const res = await send("after subscribing");
  const rows = await db.sql`
    SELECT o.topic, o.payload, c.last_message_at FROM outbox o
    JOIN conversations c ON c.id = (o.payload ->> 'conversation_id')::bigint
    WHERE o.kind = 'webhook' ORDER BY o.id`;
  assert.deepEqual(rows.map((r) => ({ ...r })), [{
    topic: "message.sent",
    payload: {
      conversation_id: chat.chatId,
      message_id: res.json.data.message_id,
      // The conversation as of the event, announced whenever the delivery goes.
      conversation: {
        status: "open",
        last_message_at: rows[0]?.payload.conversation.last_message_at,
      },
    },
    last_message_at: rows[0]?.last_message_at,
  }]);
  assert.equal(
    new Date(rows[0].payload.conversation.last_message_at).getTime(),
    new Date(rows[0].last_message_at).getTime(),
  );
});

Deno.test("WhatsApp conversations take free-form replies only within 24 hours of the customer's last inbound message", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chatAt = async (hoursAgo: number) => {
    const [client] = await db.sql`INSERT INTO clients (app_id, name) VALUES (${app.appId}, 'Wa')
      RETURNING id`;
    const [chat] = await db.sql`
      INSERT INTO conversations (app_id, client_id, channel, last_inbound_at)
      VALUES (${app.appId}, ${client.id}, 'whatsapp',
        clock_timestamp() - make_interval(hours => ${hoursAgo}))
      RETURNING id`;
    return chat.id as number;
  };
  const stale = await chatAt(25);
  const fresh = await chatAt(23);
  const send = (chatId: number, messageType: string, content: string) =>
    apiCall(server.baseUrl, "/messages", {
      key: app.key,
      json: { chat_id: chatId, content, message_type: messageType },
    });

  const before = await messageCount(db.sql);
  const refused = await send(stale, "text", "hello again");
  assert.equal(refused.status, 422);
  assert.deepEqual(refused.json, {
    code: 422,
    message: "Outside the 24-hour window: only template messages can be sent",
  });
  assert.equal(await messageCount(db.sql), before, "nothing written");

  const template = JSON.stringify({ name: "follow_up", language: "en_US" });
  assert.equal((await send(stale, "template", template)).status, 200);
  assert.equal((await send(fresh, "text", "within the window")).status, 200);
  const web = await createVisitorChat(server.baseUrl, app.publicId);
  await db.sql`UPDATE conversations SET last_inbound_at = now() - interval '3 days'
    WHERE id = ${web.chatId}`;
  assert.equal((await send(web.chatId, "text", "web has no window")).status, 200);
});

Deno.test("a write that fails after validation is 500 Failed to send and leaves nothing behind", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  await db.sql.unsafe(`
    CREATE FUNCTION refuse_bot() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'bot messages are refused'; END $$;
    CREATE TRIGGER refuse_bot BEFORE INSERT ON messages
    FOR EACH ROW WHEN (NEW.sender_type = 'bot') EXECUTE FUNCTION refuse_bot();`);
  const before = await messageCount(db.sql);
  const res = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chat.chatId, content: "doomed" },
  });
  assert.equal(res.status, 500);
  assert.deepEqual(res.json, { code: 500, message: "Failed to send" });
  assert.equal(await messageCount(db.sql), before);
  // The visitor side still works: only the failed command was refused.
  const visitor = await fetch(`${server.baseUrl}/api/v1/widget/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${chat.token}`, "content-type": "application/json" },
    body: JSON.stringify({ content: "still here" }),
  });
  assert.equal(visitor.status, 200);
});

Deno.test("POST /messages with an Idempotency-Key stores one message however often it is retried, on any instance", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  await using other = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  await db.sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${app.appId}, 'https://example.com/hook', '{message.sent}', true, 'v1:x:y')`;
  const send = (
    baseUrl: string,
    key: string,
    body: { json?: unknown; form?: Record<string, string> },
  ) =>
    apiCall(baseUrl, "/messages", { key: app.key, headers: { "idempotency-key": key }, ...body });
  const events = async () => {
    const [row] = await db.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM outbox WHERE kind = 'webhook' AND topic = 'message.sent'`;
    return row.n;
  };
  const first = await send(server.baseUrl, "order-17", {
    json: { chat_id: chat.chatId, content: "Your order shipped" },
  });
  assert.equal(first.status, 200);
  assert.equal(first.headers.get("idempotent-replayed"), null);
  const messageId = first.json.data.message_id;
  const stored = await messageCount(db.sql);

  // The same request again — as a form, chat_id a string, through another instance — is answered
  // with the first one's message, and nothing is stored, announced or pushed again.
  for (
    const [baseUrl, body] of [
      [server.baseUrl, { json: { chat_id: chat.chatId, content: "Your order shipped" } }],
      [other.baseUrl, { form: { chat_id: String(chat.chatId), content: "Your order shipped" } }],
    ] as const
  ) {
    const again = await send(baseUrl, "order-17", body);
    assert.equal(again.status, 200);
    assert.deepEqual(again.json, { code: 0, data: { message_id: messageId } });
    assert.equal(again.headers.get("idempotent-replayed"), "true");
  }
  assert.equal(await messageCount(db.sql), stored);
  assert.equal(await events(), 1);

  // The key asked for something else: refused, nothing written.
  const reused = await send(other.baseUrl, "order-17", {
    json: { chat_id: chat.chatId, content: "Your order was cancelled" },
  });
  assert.equal(reused.status, 422);
  assert.deepEqual(reused.json, {
    code: 422,
    message: "Idempotency-Key was already used for a different request",
  });
  assert.equal(reused.headers.get("x-ratelimit-limit"), "120");
  assert.equal(await messageCount(db.sql), stored);

  // Keys are the application's: another application's same key is its own.
  const acme2 = await createKeyedApp(db.sql, "Acme 2");
  const chat2 = await createVisitorChat(server.baseUrl, acme2.publicId);
  const theirs = await apiCall(server.baseUrl, "/messages", {
    key: acme2.key,
    headers: { "idempotency-key": "order-17" },
    json: { chat_id: chat2.chatId, content: "Your order shipped" },
  });
  assert.equal(theirs.status, 200);
  assert.notEqual(theirs.json.data.message_id, messageId);
  assert.equal(theirs.headers.get("idempotent-replayed"), null);

  // A request that stored nothing leaves its key free for the request that will.
  const lost = await send(server.baseUrl, "order-18", {
    json: { chat_id: chat.chatId + 1000, content: "Hello" },
  });
  assert.equal(lost.status, 404);
  const claims = await db.sql`SELECT key FROM idempotency_keys WHERE key = 'order-18'`;
  assert.equal(claims.length, 0, "the claim given back");
  const found = await send(server.baseUrl, "order-18", {
    json: { chat_id: chat.chatId, content: "Hello" },
  });
  assert.equal(found.status, 200);
  assert.equal(found.headers.get("idempotent-replayed"), null);
});

Deno.test("POST /messages: retries of one Idempotency-Key sent at the same time store one message", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  await using other = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const before = await messageCount(db.sql);
  const answers = await Promise.all(
    Array.from(
      { length: 12 },
      (_, index) =>
        apiCall(index % 2 ? other.baseUrl : server.baseUrl, "/messages", {
          key: app.key,
          headers: { "idempotency-key": "7c0d3a8e-5b0e-4c59-9d4b-1f4e0f5b2a61" },
          json: { chat_id: chat.chatId, content: "Only once" },
        }),
    ),
  );
  assert.deepEqual(answers.map((answer) => answer.status), Array(12).fill(200));
  const ids = new Set(answers.map((answer) => answer.json.data.message_id));
  assert.equal(ids.size, 1);
  assert.equal(answers.filter((a) => a.headers.get("idempotent-replayed") === null).length, 1);
  assert.equal(await messageCount(db.sql), before + 1);
});

Deno.test("POST /messages refuses a malformed Idempotency-Key before anything else, and keys expire after a day", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  const before = await messageCount(db.sql);
  for (const key of ["", "x".repeat(256), "tab\there", "caf\u00e9"]) {
    const res = await fetch(`${server.baseUrl}/openapi/v1/messages`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app.key}`,
        "content-type": "application/json",
        // A header value is bytes: é goes out as one Latin-1 byte, never ASCII.
        "idempotency-key": key,
      },
      body: JSON.stringify({ chat_id: chat.chatId, content: "hi" }),
    });
    assert.equal(res.status, 400, JSON.stringify(key));
    assert.deepEqual(await res.json(), {
      code: 400,
      message: "Idempotency-Key must be 1 to 255 printable ASCII characters",
    });
  }
  assert.equal(await messageCount(db.sql), before);

  const send = (content: string) =>
    apiCall(server.baseUrl, "/messages", {
      key: app.key,
      headers: { "idempotency-key": "x".repeat(255) },
      json: { chat_id: chat.chatId, content },
    });
  assert.equal((await send("first")).status, 200);
  assert.equal((await send("second")).status, 422);
  assert.equal(await sweepIdempotencyKeys(db.sql), 0);
  await db.sql`UPDATE idempotency_keys SET created_at = created_at - interval '25 hours'`;
  assert.equal(await sweepIdempotencyKeys(db.sql), 1);
  const later = await send("second");
  assert.equal(later.status, 200);
  assert.equal(later.headers.get("idempotent-replayed"), null);
  assert.equal(await messageCount(db.sql), before + 2);
});
