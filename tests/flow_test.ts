import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { apiCall, createKeyedApp } from "./support/open_api.ts";
import { waitUntil } from "./support/realtime.ts";
import { executeCommand } from "../src/cli.ts";
import { templateFlow } from "./support/flows.ts";
import { createAppCommitLoop } from "../src/actors/app_commit_loop.ts";
import { commitBatch } from "../src/db/write_batch.ts";

/** The contract's sample Flow (CONTRACT §4.1), with a node that closes the conversation. */
const FLOW = {
  start: "welcome",
  nodes: {
    welcome: {
      message: {
        message_type: "buttons",
        content: {
          text: "Hi! What do you need?",
          buttons: [
            { id: "sales", title: "Sales" },
            { id: "help", title: "Support" },
            { id: "bye", title: "Nothing" },
          ],
        },
      },
      on: { sales: "sales", help: "handoff", bye: "bye" },
    },
    sales: {
      message: { message_type: "text", content: "A sales rep will be with you shortly." },
      then: "handoff",
    },
    bye: { message: { message_type: "text", content: "Bye!" }, then: "close" },
  },
};

interface Frame {
  type: string;
  chat_id: number;
  /** On `chat.updated`. */
  chat?: { status: string };
  message?: {
    id: number;
    sender_type: string;
    message_type: string;
    content: string;
    payload?: unknown;
  };
}

/** A visitor with an open socket, and helpers to act as them. */
async function visitorOf(baseUrl: string, publicId: string) {
  const created = await fetch(`${baseUrl}/api/v1/widget/${publicId}/visitors`, { method: "POST" });
  const { visitor_token: token } = (await created.json()).data as { visitor_token: string };
  const frames: Frame[] = [];
  const socket = new WebSocket(
    `${baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=${token}`,
  );
  socket.onmessage = (event) => frames.push(JSON.parse(event.data));
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  async function post(path: string, body: unknown) {
    const res = await fetch(`${baseUrl}/api/v1/widget${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  }
  const messages = () =>
    frames.flatMap((frame) =>
      frame.type === "message.created" && frame.message ? [frame.message] : []
    );
  return {
    token,
    frames,
    /** The messages pushed so far, in order. */
    messages,
    send: (content: string) => post("/messages", { content }),
    /** Says "Hello" and waits for the Flow's first message: the chat and that message. */
    async startChat() {
      const chatId: number = (await post("/messages", { content: "Hello" })).json.data.chat_id;
      await waitUntil(() => messages().length >= 2, "the Flow's first message");
      return { chatId, welcome: messages()[1] };
    },
    click: (chatId: number, messageId: number, actionId: string) =>
      post("/actions", { chat_id: chatId, message_id: messageId, action_id: actionId }),
    async [Symbol.asyncDispose]() {
      const closed = new Promise((resolve) => socket.onclose = resolve);
      socket.close();
      await closed;
    },
  };
}

async function setUp() {
  const db = await createTestDatabase();
  const server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const put = await apiCall(server.baseUrl, "/flow", { method: "PUT", key: app.key, json: FLOW });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  return {
    db,
    server,
    app,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]();
      await db[Symbol.asyncDispose]();
    },
  };
}

Deno.test("a Flow that says goodbye at once: the socket still hears the conversation open before its messages, then closed", async () => {
  await using env = await setUp();
  const farewell = {
    start: "bye",
    nodes: { bye: { message: { message_type: "text", content: "We are closed." }, then: "close" } },
  };
  const put = await apiCall(env.server.baseUrl, "/flow", {
    method: "PUT",
    key: env.app.key,
    json: farewell,
  });
  assert.equal(put.status, 200);
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const sent = await visitor.send("Anyone there?");
  assert.equal(sent.status, 200);
  const chatId: number = sent.json.data.chat_id;
  await waitUntil(
    () => visitor.frames.some((frame) => frame.chat?.status === "closed"),
    "the conversation closed",
  );
  const seen = visitor.frames.map((frame) =>
    frame.type === "chat.updated"
      ? `${frame.type} ${frame.chat_id} ${frame.chat?.status}`
      : `${frame.type} ${frame.chat_id} ${frame.message?.sender_type}`
  );
  assert.deepEqual(seen, [
    `chat.updated ${chatId} open`,
    `message.created ${chatId} visitor`,
    `message.created ${chatId} flow`,
    `chat.updated ${chatId} closed`,
  ]);
});

Deno.test("a Flow walks over the widget: start, buttons on the socket, click, next node, handoff", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);

  const hello = await visitor.send("Hello");
  assert.equal(hello.status, 200);
  const chatId: number = hello.json.data.chat_id;
  await waitUntil(() => visitor.messages().length >= 2, "the Flow's first message");
  const [first, welcome] = visitor.messages();
  assert.equal(first.content, "Hello");
  assert.equal(welcome.sender_type, "flow");
  assert.equal(welcome.message_type, "buttons");
  assert.deepEqual(welcome.payload, FLOW.nodes.welcome.message.content);
  assert.deepEqual(JSON.parse(welcome.content), FLOW.nodes.welcome.message.content);

  const clicked = await visitor.click(chatId, welcome.id, "sales");
  assert.equal(clicked.status, 200, JSON.stringify(clicked.json));
  await waitUntil(() => visitor.messages().length >= 4, "the click and the next node");
  const [, , click, sales] = visitor.messages();
  assert.deepEqual(
    { id: click.id, sender: click.sender_type, type: click.message_type, content: click.content },
    { id: clicked.json.data.message_id, sender: "visitor", type: "text", content: "Sales" },
  );
  assert.equal(sales.sender_type, "flow");
  assert.equal(sales.content, "A sales rep will be with you shortly.");

  // Handed off: the Flow no longer reacts, and the visitor's next words reach humans only.
  const again = await visitor.click(chatId, welcome.id, "help");
  assert.deepEqual(again, {
    status: 409,
    json: { code: 409, message: "This action is no longer available" },
  });
  await visitor.send("Thanks");
  const [state] = await env.db.sql`
    SELECT status, action_message_id, flow_node FROM conversations WHERE id = ${chatId}`;
  assert.deepEqual({ ...state }, { status: "open", action_message_id: null, flow_node: null });
  const history = await env.db.sql`
    SELECT sender_type, content FROM messages WHERE conversation_id = ${chatId} ORDER BY id`;
  assert.deepEqual(history.map((row) => `${row.sender_type}: ${row.content.slice(0, 20)}`), [
    "visitor: Hello",
    'flow: {"text":"Hi! What do',
    "visitor: Sales",
    "flow: A sales rep will be ",
    "visitor: Thanks",
  ]);
});

Deno.test("a double click advances the Flow once", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const { chatId, welcome } = await visitor.startChat();

  const clicks = await Promise.all(
    Array.from({ length: 5 }, () => visitor.click(chatId, welcome.id, "sales")),
  );
  assert.deepEqual(clicks.map((click) => click.status).sort(), [200, 409, 409, 409, 409]);
  const [counts] = await env.db.sql`
    SELECT count(*) FILTER (WHERE sender_type = 'visitor' AND content = 'Sales') AS clicks,
      count(*) FILTER (WHERE sender_type = 'flow') AS flow_messages
    FROM messages WHERE conversation_id = ${chatId}`;
  assert.deepEqual({ ...counts }, { clicks: 1, flow_messages: 2 });
});

Deno.test("clicks that are stale, foreign or unknown are refused and change nothing", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  await using stranger = await visitorOf(env.server.baseUrl, env.app.publicId);
  const sent = await visitor.send("Hello");
  const { chat_id: chatId, message_id: hello } = sent.json.data as Record<string, number>;
  await waitUntil(() => visitor.messages().length >= 2, "the Flow's first message");
  const welcome = visitor.messages()[1];
  const before = await env.db.sql`SELECT count(*) AS n FROM messages`;

  assert.deepEqual(await stranger.click(chatId, welcome.id, "sales"), {
    status: 404,
    json: { code: 404, message: "Conversation not found" },
  });
  assert.deepEqual(await visitor.click(chatId + 1000, welcome.id, "sales"), {
    status: 404,
    json: { code: 404, message: "Conversation not found" },
  });
  assert.deepEqual(await visitor.click(chatId, welcome.id, "nope"), {
    status: 400,
    json: { code: 400, message: "Unknown action" },
  });
  assert.deepEqual(await visitor.click(chatId, hello, "sales"), {
    status: 400,
    json: { code: 400, message: "Unknown action" },
  });
  const malformed = await fetch(`${env.server.baseUrl}/api/v1/widget/actions`, {
    method: "POST",
    headers: { authorization: `Bearer ${visitor.token}`, "content-type": "application/json" },
    body: JSON.stringify({ chat_id: "1", message_id: welcome.id, action_id: "sales" }),
  });
  assert.equal(malformed.status, 400);
  assert.equal(
    (await malformed.json()).message,
    "Invalid action: chat_id must be a positive integer",
  );
  // Ids are judged by their JSON text: a number that only rounds to the welcome's id is none.
  const rounded = await fetch(`${env.server.baseUrl}/api/v1/widget/actions`, {
    method: "POST",
    headers: { authorization: `Bearer ${visitor.token}`, "content-type": "application/json" },
    body: `{"chat_id":${chatId},"message_id":${welcome.id - 1}.99999999999999999,` +
      `"action_id":"sales"}`,
  });
  assert.equal(rounded.status, 400);
  assert.equal(
    (await rounded.json()).message,
    "Invalid action: message_id must be a positive integer",
  );
  assert.deepEqual(await visitor.click(chatId, welcome.id, "sales\u0000"), {
    status: 400,
    json: { code: 400, message: "Invalid action: action_id must not contain NUL characters" },
  });
  for (const actionId of ["", "x".repeat(257), 7]) {
    assert.deepEqual(await visitor.click(chatId, welcome.id, actionId as string), {
      status: 400,
      json: {
        code: 400,
        message: "Invalid action: action_id must be a string of 1 to 256 characters",
      },
    }, JSON.stringify(actionId));
  }
  assert.deepEqual(await env.db.sql`SELECT count(*) AS n FROM messages`, before);

  // Still waiting: the refusals consumed nothing.
  assert.equal((await visitor.click(chatId, welcome.id, "help")).status, 200);
});

Deno.test("a click leading to close closes the conversation, and its buttons go stale", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const { chatId, welcome } = await visitor.startChat();

  assert.equal((await visitor.click(chatId, welcome.id, "bye")).status, 200);
  await waitUntil(
    () =>
      visitor.frames.some((frame) => frame.type === "chat.updated") &&
      visitor.messages().some((message) => message.content === "Bye!"),
    "the Flow's last message and the closed conversation",
  );
  const [chat] = await env.db.sql`SELECT status FROM conversations WHERE id = ${chatId}`;
  assert.equal(chat.status, "closed");
  // The close reaches the socket after the messages that led to it.
  await waitUntil(
    () => visitor.frames.filter((frame) => frame.type === "chat.updated").length === 2,
    "the closed state",
  );
  const order = visitor.frames.map((frame) =>
    frame.type === "chat.updated" ? `chat ${frame.chat?.status}` : frame.type
  );
  assert.deepEqual(order.slice(-3), ["message.created", "message.created", "chat closed"]);
  assert.equal((await visitor.click(chatId, welcome.id, "sales")).status, 409);

  // The next message opens a new conversation, and the Flow starts again there.
  const next = await visitor.send("Hello again");
  assert.notEqual(next.json.data.chat_id, chatId);
  await waitUntil(
    () => visitor.messages().filter((message) => message.message_type === "buttons").length === 2,
    "the Flow's restart",
  );
});

Deno.test("a click on a button the Flow's on leaves out is stored once and stops the Flow", async () => {
  await using env = await setUp();
  const partial = structuredClone(FLOW);
  partial.nodes.welcome.on = { sales: "sales" } as typeof FLOW.nodes.welcome.on;
  const put = await apiCall(env.server.baseUrl, "/flow", {
    method: "PUT",
    key: env.app.key,
    json: partial,
  });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const { chatId, welcome } = await visitor.startChat();

  const click = await visitor.click(chatId, welcome.id, "help");
  assert.equal(click.status, 200, JSON.stringify(click.json));
  // The Flow stops as on handoff: nothing more is sent, and the step is no longer clickable.
  assert.equal((await visitor.click(chatId, welcome.id, "sales")).status, 409);
  const rows = await env.db.sql`
    SELECT sender_type, content FROM messages WHERE conversation_id = ${chatId} ORDER BY id`;
  assert.deepEqual(rows.map((row) => [row.sender_type, row.content]).slice(2), [[
    "visitor",
    "Support",
  ]]);
  const [chat] = await env.db.sql`SELECT status FROM conversations WHERE id = ${chatId}`;
  assert.equal(chat.status, "open");
});

Deno.test("a click on a button of a Flow replaced since shows the node again as it is now", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const { chatId, welcome } = await visitor.startChat();
  const replaced = structuredClone(FLOW);
  replaced.nodes.welcome.message.content.buttons = [{ id: "buy", title: "Buy" }];
  (replaced.nodes.welcome as { on: Record<string, string> }).on = { buy: "sales" };
  const put = await apiCall(env.server.baseUrl, "/flow", {
    method: "PUT",
    key: env.app.key,
    json: replaced,
  });
  assert.equal(put.status, 200, JSON.stringify(put.json));

  const click = await visitor.click(chatId, welcome.id, "sales");
  assert.equal(click.status, 200, JSON.stringify(click.json));
  await waitUntil(() => visitor.messages().length >= 4, "the node shown again");
  const [clicked, again] = visitor.messages().slice(2);
  assert.equal(clicked.content, "Sales");
  assert.equal(again.sender_type, "flow");
  assert.deepEqual((again.payload as { buttons: unknown }).buttons, [{ id: "buy", title: "Buy" }]);
  // The visitor can go on from it.
  assert.equal((await visitor.click(chatId, again.id, "buy")).status, 200);
  await waitUntil(
    () => visitor.messages().some((message) => message.content.startsWith("A sales rep")),
    "the new Flow's next node",
  );
});

Deno.test("a message queued behind a click that closes the conversation opens a new one", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const { chatId, welcome } = await visitor.startChat();
  const [{ client_id: clientId }] = await env.db.sql`
    SELECT client_id FROM conversations WHERE id = ${chatId}`;

  // The actors' commit loop, as their worker builds it, on this database: the click and the
  // message queue behind a first command, so that they could share one batch.
  const loop = createAppCommitLoop((commands) => commitBatch(env.db.sql, commands), {
    maxInFlight: 1,
  });
  const appId = env.app.appId;
  const say = (content: string) =>
    loop.submit(`app:${appId}`, {
      kind: "visitor.message",
      appId,
      clientId,
      messageType: "text",
      content,
    });
  const first = say("Before");
  const click = loop.submit(`app:${appId}`, {
    kind: "visitor.action",
    appId,
    clientId,
    chatId,
    messageId: welcome.id,
    actionId: "bye",
  });
  const after = say("One more thing");
  const results = await Promise.all([first, click, after]);
  await loop.stop();
  assert.ok(results.every((result) => result.ok), JSON.stringify(results));
  const last = results[2].ok ? (results[2].value as { chat_id: number }) : null;
  assert.notEqual(last?.chat_id, chatId, "the message went into the conversation the click closed");
  const [closed] = await env.db.sql`SELECT status FROM conversations WHERE id = ${chatId}`;
  assert.equal(closed.status, "closed");
});

Deno.test("buttons the bot sends through the Open API take one click, which drives no Flow", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  await using visitor = await visitorOf(server.baseUrl, app.publicId);
  const chatId: number = (await visitor.send("Hello")).json.data.chat_id;
  const sent = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: {
      chat_id: chatId,
      message_type: "card",
      content: JSON.stringify({ title: "Plan", buttons: [{ id: "buy", title: "Buy" }] }),
    },
  });
  assert.equal(sent.status, 200);
  const cardId: number = sent.json.data.message_id;

  assert.equal((await visitor.click(chatId, cardId, "buy")).status, 200);
  assert.equal((await visitor.click(chatId, cardId, "buy")).status, 409);
  const rows = await db.sql`
    SELECT sender_type, content FROM messages WHERE conversation_id = ${chatId} ORDER BY id`;
  assert.deepEqual(rows.map((row) => row.sender_type), ["visitor", "bot", "visitor"]);
  assert.equal(rows[2].content, "Buy");
});

Deno.test("the bot's buttons sent while a Flow waits leave the Flow's step clickable", async () => {
  await using env = await setUp();
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const { chatId, welcome } = await visitor.startChat();
  const rate = JSON.stringify({ text: "Rate us", buttons: [{ id: "good", title: "Good" }] });
  const sent = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: chatId, message_type: "buttons", content: rate },
  });
  assert.equal(sent.status, 200);
  const rateId: number = sent.json.data.message_id;

  // The Flow's step still moves the Flow on, and the bot's buttons take their one click.
  assert.equal((await visitor.click(chatId, welcome.id, "sales")).status, 200);
  await waitUntil(
    () => visitor.messages().some((message) => message.content.startsWith("A sales rep")),
    "the Flow's next node",
  );
  assert.equal((await visitor.click(chatId, rateId, "good")).status, 200);
  assert.equal((await visitor.click(chatId, rateId, "good")).status, 409);
  assert.equal((await visitor.click(chatId, welcome.id, "help")).status, 409);
  const rows = await env.db.sql`
    SELECT sender_type, content FROM messages WHERE conversation_id = ${chatId} ORDER BY id`;
  assert.deepEqual(rows.map((row) => `${row.sender_type}: ${row.content}`), [
    "visitor: Hello",
    `flow: ${welcome.content}`,
    `bot: ${rate}`,
    "visitor: Sales",
    "flow: A sales rep will be with you shortly.",
    "visitor: Good",
  ]);
});

Deno.test("a web visitor's click on a template's quick reply drives the Flow", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const flow = templateFlow(["yes"], { yes: "close" });
  const put = await apiCall(server.baseUrl, "/flow", { method: "PUT", key: app.key, json: flow });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  await using visitor = await visitorOf(server.baseUrl, app.publicId);
  const chatId: number = (await visitor.send("Hello")).json.data.chat_id;
  await waitUntil(() => visitor.messages().length >= 2, "the template");
  const template = visitor.messages()[1];
  assert.equal((await visitor.click(chatId, template.id, "no")).status, 400);
  assert.equal((await visitor.click(chatId, template.id, "yes")).status, 200);
  const [chat] = await db.sql`SELECT status FROM conversations WHERE id = ${chatId}`;
  assert.equal(chat.status, "closed");
  const [click] = await db.sql`
    SELECT content FROM messages WHERE conversation_id = ${chatId} AND sender_type = 'visitor'
    ORDER BY id DESC LIMIT 1`;
  assert.equal(click.content, "yes");
});

Deno.test("a blank quick reply of a bot's template is no button: its click is refused and stores nothing", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  await using visitor = await visitorOf(server.baseUrl, app.publicId);
  const chatId: number = (await visitor.send("Hello")).json.data.chat_id;
  const parameters = ["ok", "   ", "\u200b"].map((payload) => ({ type: "payload", payload }));
  const template = {
    name: "confirm",
    language: "en",
    components: [{ type: "button", sub_type: "quick_reply", index: 0, parameters }],
  };
  const sent = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: chatId, message_type: "template", content: JSON.stringify(template) },
  });
  assert.equal(sent.status, 200, JSON.stringify(sent.json));
  const messageId: number = sent.json.data.message_id;
  for (const blank of ["   ", "\u200b"]) {
    const click = await visitor.click(chatId, messageId, blank);
    assert.deepEqual([click.status, click.json.message], [400, "Unknown action"]);
  }
  const [{ n }] = await db.sql`
    SELECT count(*)::int AS n FROM messages WHERE conversation_id = ${chatId}`;
  assert.equal(n, 2, "nothing stored");
  assert.equal((await visitor.click(chatId, messageId, "ok")).status, 200);
});

Deno.test("without a Flow nothing automatic is sent", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  await using visitor = await visitorOf(server.baseUrl, app.publicId);
  await visitor.send("Hello");
  await visitor.send("Anyone?");
  const [row] = await db
    .sql`SELECT count(*) FILTER (WHERE sender_type = 'flow') AS n FROM messages`;
  assert.equal(row.n, 0);
});

Deno.test("flow messages are announced as message.sent to a subscribed webhook", async () => {
  await using env = await setUp();
  await env.db.sql`
    INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${env.app.appId}, 'https://receiver.invalid/hook',
      '{chat.started,message.received,message.sent}', true, 'unused')`;
  await using visitor = await visitorOf(env.server.baseUrl, env.app.publicId);
  const chatId: number = (await visitor.send("Hello")).json.data.chat_id;
  await waitUntil(() => visitor.messages().length >= 2, "the Flow's first message");
  await visitor.click(chatId, visitor.messages()[1].id, "sales");
  const topics = await env.db.sql`SELECT topic FROM outbox WHERE kind = 'webhook' ORDER BY id`;
  assert.deepEqual(topics.map((row) => row.topic), [
    "chat.started",
    "message.received",
    "message.sent",
    "message.received",
    "message.sent",
  ]);
});

Deno.test("GET, PUT and DELETE /flow read, validate, replace and remove the Flow", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const other = await createKeyedApp(db.sql, "Other");

  assert.deepEqual((await apiCall(server.baseUrl, "/flow", { key: app.key })).json, {
    code: 0,
    data: null,
  });
  const put = await apiCall(server.baseUrl, "/flow", { method: "PUT", key: app.key, json: FLOW });
  assert.deepEqual(put.json, { code: 0, data: FLOW });
  assert.deepEqual((await apiCall(server.baseUrl, "/flow", { key: app.key })).json.data, FLOW);
  assert.equal((await apiCall(server.baseUrl, "/flow", { key: other.key })).json.data, null);

  const broken = { ...FLOW, start: "nowhere" };
  assert.deepEqual(
    (await apiCall(server.baseUrl, "/flow", { method: "PUT", key: app.key, json: broken })).json,
    { code: 400, message: 'Invalid flow: start: unknown node "nowhere"' },
  );
  const text = await apiCall(server.baseUrl, "/flow", {
    method: "PUT",
    key: app.key,
    raw: "start=x",
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  assert.equal(text.status, 415);
  assert.deepEqual((await apiCall(server.baseUrl, "/flow", { key: app.key })).json.data, FLOW);

  const deleted = await apiCall(server.baseUrl, "/flow", { method: "DELETE", key: app.key });
  assert.deepEqual(deleted.json, { code: 0, data: null });
  assert.equal((await apiCall(server.baseUrl, "/flow", { key: app.key })).json.data, null);
  const post = await apiCall(server.baseUrl, "/flow", { method: "POST", key: app.key, json: {} });
  assert.equal(post.status, 405);
});

Deno.test("flow:set and flow:get store and print the Flow; a broken file is refused", async () => {
  await using db = await createTestDatabase();
  const app = await createKeyedApp(db.sql);
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/flow.json`;
    await Deno.writeTextFile(file, JSON.stringify(FLOW));
    const flags = { app: String(app.appId), file };
    assert.deepEqual(await executeCommand(db.sql, { command: "flow:set", flags }), FLOW);
    assert.deepEqual(
      await executeCommand(db.sql, { command: "flow:get", flags: { app: String(app.appId) } }),
      FLOW,
    );
    await Deno.writeTextFile(file, JSON.stringify({ ...FLOW, nodes: {} }));
    await assert.rejects(
      executeCommand(db.sql, { command: "flow:set", flags }),
      { message: "Invalid flow: nodes must have at least one node" },
    );
    // A secret given by mistake is not quoted back.
    await Deno.writeTextFile(file, "bdOv6nBKxhYvc3P0secret");
    await assert.rejects(
      executeCommand(db.sql, { command: "flow:set", flags }),
      { message: `${file} is not JSON` },
    );
    await assert.rejects(
      executeCommand(db.sql, { command: "flow:set", flags: { ...flags, file: `${dir}/none` } }),
      (error: Error) => error.message.startsWith(`Cannot read ${dir}/none`),
    );
    assert.deepEqual(
      await executeCommand(db.sql, { command: "flow:get", flags: { app: String(app.appId) } }),
      FLOW,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
