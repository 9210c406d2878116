import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import { createVisitor, sendMessages } from "./support/realtime.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import type { Sql } from "../src/db/client.ts";

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const CONVERSATION_KEYS = ["channel", "client_id", "created_at", "id", "last_message_at", "status"];

/** Opens `count` conversations of `appId`, one visitor each, oldest first; returns their ids. */
async function openConversations(sql: Sql, appId: number, count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const clientId = await createVisitor(sql, appId);
    const [sent] = await sendMessages(sql, [[appId, clientId, `hello ${i}`]]);
    ids.push(sent.chat_id);
  }
  return ids;
}

async function close(sql: Sql, appId: number, chatId: number): Promise<void> {
  const [result] = await commitBatch(sql, [{ kind: "chat.close", appId, chatId }]);
  assert.equal(result.ok, true);
}

Deno.test("GET /conversations lists the caller's conversations by latest activity with real microseconds", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const first = await createVisitorChat(server.baseUrl, app.publicId);
  const second = await createVisitorChat(server.baseUrl, app.publicId);
  const third = await createVisitorChat(server.baseUrl, app.publicId);
  // A reply moves the first conversation to the top.
  const reply = await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: first.chatId, content: "Thanks for waiting" },
  });
  assert.equal(reply.status, 200);

  const res = await apiCall(server.baseUrl, "/conversations", { key: app.key });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
  assert.equal(res.json.code, 0);
  assert.deepEqual(res.json.data.map((c: { id: number }) => c.id), [
    first.chatId,
    third.chatId,
    second.chatId,
  ]);
  const rows = await db.sql<{ id: number; last: string; created: string }[]>`
    SELECT id,
      to_char(last_message_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last,
      to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created
    FROM conversations`;
  for (const conversation of res.json.data) {
    assert.deepEqual(Object.keys(conversation).sort(), CONVERSATION_KEYS);
    assert.match(conversation.last_message_at, TIMESTAMP);
    assert.match(conversation.created_at, TIMESTAMP);
    const row = rows.find((r) => r.id === conversation.id)!;
    assert.equal(conversation.last_message_at, row.last);
    assert.equal(conversation.created_at, row.created);
    assert.equal(conversation.status, "open");
    assert.equal(conversation.channel, "web");
  }
  assert.equal(res.json.data[1].client_id, third.clientId);
  assert.equal(res.headers.get("link"), null, "one page holds everything");
});

Deno.test("GET /conversations filters by status and refuses an unknown one", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const [a, b, c] = await openConversations(db.sql, app.appId, 3);
  await close(db.sql, app.appId, b);

  const closed = await apiCall(server.baseUrl, "/conversations?status=closed", { key: app.key });
  assert.deepEqual(closed.json.data.map((x: { id: number }) => x.id), [b]);
  assert.equal(closed.json.data[0].status, "closed");
  const open = await apiCall(server.baseUrl, "/conversations?status=open", { key: app.key });
  assert.deepEqual(open.json.data.map((x: { id: number }) => x.id), [c, a]);
  const all = await apiCall(server.baseUrl, "/conversations?status=", { key: app.key });
  assert.equal(all.json.data.length, 3);

  for (const status of ["pending", "OPEN", "open,closed"]) {
    const bad = await apiCall(server.baseUrl, `/conversations?status=${status}`, { key: app.key });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json, { code: 400, message: "status must be one of: open, closed" });
  }
});

Deno.test("GET /conversations limit defaults to 20, clamps to 1..50 and treats non-integers as the default", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  await openConversations(db.sql, app.appId, 53);
  const count = async (query: string) => {
    const res = await apiCall(server.baseUrl, `/conversations${query}`, { key: app.key });
    assert.equal(res.status, 200, JSON.stringify(res.json));
    return res.json.data.length;
  };
  assert.equal(await count(""), 20);
  assert.equal(await count("?limit=7"), 7);
  assert.equal(await count("?limit=0"), 1);
  assert.equal(await count("?limit=-5"), 1);
  assert.equal(await count("?limit=50"), 50);
  assert.equal(await count("?limit=51"), 50);
  // An integer of any length is an integer: clamped, not the default.
  assert.equal(await count("?limit=99999999999999999999"), 50);
  assert.equal(await count("?limit=-99999999999999999999"), 1);
  assert.equal(await count("?limit=007"), 7);
  for (const bad of ["abc", "1.5", "", "2e1", "0x10"]) {
    assert.equal(await count(`?limit=${bad}`), 20, `limit=${bad}`);
  }
});

Deno.test("GET /conversations pages with an opaque before cursor and a Link header", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {
    PUBLIC_BASE_URL: "https://parley.example.com",
  });
  const app = await createKeyedApp(db.sql);
  const ids = await openConversations(db.sql, app.appId, 7);
  await close(db.sql, app.appId, ids[3]);
  // Equal activity times must not lose or repeat rows: give three conversations the same one.
  await db.sql`UPDATE conversations SET last_message_at = '2026-01-01T00:00:00.000001Z'
    WHERE id IN (${ids[0]}, ${ids[1]}, ${ids[2]})`;

  const seen: number[] = [];
  let path = "/conversations?limit=2&status=open";
  for (let page = 0; page < 10; page++) {
    const res = await apiCall(server.baseUrl, path, { key: app.key });
    assert.equal(res.status, 200);
    seen.push(...res.json.data.map((c: { id: number }) => c.id));
    const link = res.headers.get("link");
    if (!link) break;
    const match =
      /^<https:\/\/parley\.example\.com\/openapi\/v1(\/conversations\?[^>]+)>; rel="next"$/
        .exec(link);
    assert.ok(match, link);
    assert.match(match[1], /status=open/);
    assert.match(match[1], /limit=2/);
    path = match[1];
  }
  const open = ids.filter((id) => id !== ids[3]);
  assert.deepEqual(seen, [open[5], open[4], open[3], open[2], open[1], open[0]]);

  for (const before of ["nope", "MjAyNi0wMS0wMVQwMDowMDowMC4wMDAwMDFa", "%20"]) {
    const bad = await apiCall(server.baseUrl, `/conversations?before=${before}`, { key: app.key });
    assert.equal(bad.status, 400, before);
    assert.deepEqual(bad.json, { code: 400, message: "before is not a valid cursor" });
  }
});

Deno.test("GET /conversations/{id} answers the caller's conversation and 404 for anything else", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql, "A");
  const other = await createKeyedApp(db.sql, "B");
  const [mine] = await openConversations(db.sql, app.appId, 1);
  const [theirs] = await openConversations(db.sql, other.appId, 1);

  const res = await apiCall(server.baseUrl, `/conversations/${mine}`, { key: app.key });
  assert.equal(res.status, 200);
  const listed = await apiCall(server.baseUrl, "/conversations", { key: app.key });
  assert.deepEqual(res.json, { code: 0, data: listed.json.data[0] });

  for (const id of [String(theirs), "999999", "abc", "1.0", "0", "-1", "99999999999999999999"]) {
    const missing = await apiCall(server.baseUrl, `/conversations/${id}`, { key: app.key });
    assert.equal(missing.status, 404, id);
    assert.deepEqual(missing.json, { code: 404, message: "Conversation not found" });
  }
  const theirsForThem = await apiCall(server.baseUrl, `/conversations/${theirs}`, {
    key: other.key,
  });
  assert.equal(theirsForThem.status, 200);
});

Deno.test("a key never sees another application's data on any endpoint", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const a = await createKeyedApp(db.sql, "A");
  const b = await createKeyedApp(db.sql, "B");
  const aChat = await createVisitorChat(server.baseUrl, a.publicId, "secret of A");
  const bChat = await createVisitorChat(server.baseUrl, b.publicId, "secret of B");

  const listA = await apiCall(server.baseUrl, "/conversations", { key: a.key });
  assert.deepEqual(listA.json.data.map((c: { id: number }) => c.id), [aChat.chatId]);
  const listB = await apiCall(server.baseUrl, "/conversations", { key: b.key });
  assert.deepEqual(listB.json.data.map((c: { id: number }) => c.id), [bChat.chatId]);

  const [before] = await db.sql`SELECT count(*)::int AS n FROM messages`;
  const answers = [
    await apiCall(server.baseUrl, `/conversations/${bChat.chatId}`, { key: a.key }),
    await apiCall(server.baseUrl, `/conversations/${bChat.chatId}/messages`, { key: a.key }),
    await apiCall(server.baseUrl, "/messages", {
      key: a.key,
      json: { chat_id: bChat.chatId, content: "intrusion" },
    }),
    await apiCall(server.baseUrl, "/messages", {
      key: a.key,
      form: { chat_id: String(bChat.chatId), content: "intrusion" },
    }),
  ];
  for (const answer of answers) {
    assert.equal(answer.status, 404);
    assert.deepEqual(answer.json, { code: 404, message: "Conversation not found" });
    assert.ok(!JSON.stringify(answer.json).includes("secret"));
  }
  const [after] = await db.sql`SELECT count(*)::int AS n FROM messages`;
  assert.equal(after.n, before.n, "nothing written");
});

Deno.test("GET /conversations/{id}/messages answers the latest messages oldest first, notes included", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId, "first");
  const ids = [chat.messageId];
  for (const content of ["second", "third", "fourth"]) {
    const sent = await apiCall(server.baseUrl, "/messages", {
      key: app.key,
      json: { chat_id: chat.chatId, content },
    });
    ids.push(sent.json.data.message_id);
  }
  await db.sql`UPDATE messages SET internal = true WHERE id = ${ids[2]}`;

  const all = await apiCall(server.baseUrl, `/conversations/${chat.chatId}/messages`, {
    key: app.key,
  });
  assert.equal(all.status, 200);
  assert.deepEqual(all.json.data.map((m: { id: number }) => m.id), ids);
  assert.equal(all.json.data[0].sender_type, "visitor");
  assert.equal(all.json.data[1].sender_type, "bot");
  assert.equal(all.json.data[2].internal, true);
  assert.match(all.json.data[3].created_at, TIMESTAMP);

  const page = await apiCall(
    server.baseUrl,
    `/conversations/${chat.chatId}/messages?limit=2&before=${ids[3]}`,
    { key: app.key },
  );
  assert.deepEqual(page.json.data.map((m: { content: string }) => m.content), ["second", "third"]);
  const lenient = await apiCall(
    server.baseUrl,
    `/conversations/${chat.chatId}/messages?limit=x&before=y`,
    { key: app.key },
  );
  assert.equal(lenient.json.data.length, 4);

  const widget = await fetch(`${server.baseUrl}/api/v1/widget/messages?chat_id=${chat.chatId}`, {
    headers: { authorization: `Bearer ${chat.token}` },
  });
  const history = (await widget.json()).data.map((m: { content: string }) => m.content);
  assert.deepEqual(history, ["first", "second", "fourth"], "the visitor never sees the note");
});

Deno.test("unknown routes are 404 and known paths with a wrong method 405, after authentication", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const cases: [string, string, number, string][] = [
    ["GET", "/nope", 404, "Not found"],
    ["GET", "/conversations/1/other", 404, "Not found"],
    ["GET", "/webhooks", 404, "Not found"],
    ["DELETE", "/conversations", 405, "Method not allowed"],
    ["POST", "/conversations/1", 405, "Method not allowed"],
    ["GET", "/messages", 405, "Method not allowed"],
    ["PUT", "/messages", 405, "Method not allowed"],
  ];
  const allowed = await apiCall(server.baseUrl, "/conversations/1/messages", {
    method: "DELETE",
    key: app.key,
  });
  assert.equal(allowed.headers.get("allow"), "GET, HEAD");
  const posted = await apiCall(server.baseUrl, "/messages", { method: "GET", key: app.key });
  assert.equal(posted.headers.get("allow"), "POST");
  for (const [method, path, status, message] of cases) {
    const res = await apiCall(server.baseUrl, path, { method, key: app.key });
    assert.equal(res.status, status, `${method} ${path}`);
    assert.deepEqual(res.json, { code: status, message });
    assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
    assert.ok(res.headers.get("x-ratelimit-remaining"));
    if (status === 405) assert.match(res.headers.get("allow") ?? "", /^[A-Z]+(, [A-Z]+)*$/);
    const anonymous = await apiCall(server.baseUrl, path, { method });
    assert.equal(anonymous.status, 401, `${method} ${path} without a key`);
  }
});

Deno.test("an unexpected failure is 500 Internal server error without its cause", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  await db.sql`ALTER TABLE conversations RENAME TO conversations_gone`;
  const res = await apiCall(server.baseUrl, "/conversations", { key: app.key });
  assert.equal(res.status, 500);
  assert.deepEqual(res.json, { code: 500, message: "Internal server error" });
  assert.ok(res.headers.get("x-ratelimit-limit"), "errors carry the rate-limit headers too");
});

Deno.test("a listing read from memory shows this instance's writes at once and other instances' soon after", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const first = await createVisitorChat(server.baseUrl, app.publicId);
  const second = await createVisitorChat(server.baseUrl, app.publicId);
  const ids = async (query = "") =>
    (await apiCall(server.baseUrl, `/conversations${query}`, { key: app.key })).json.data.map(
      (c: { id: number }) => c.id,
    );
  assert.deepEqual(await ids(), [second.chatId, first.chatId]);

  // Through this instance: visible in the very next read.
  await apiCall(server.baseUrl, "/messages", {
    key: app.key,
    json: { chat_id: first.chatId, content: "bump" },
  });
  assert.deepEqual(await ids(), [first.chatId, second.chatId]);
  await fetch(`${server.baseUrl}/api/v1/widget/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${second.token}`, "content-type": "application/json" },
    body: JSON.stringify({ content: "me again" }),
  }).then((res) => res.body?.cancel());
  assert.deepEqual(await ids(), [second.chatId, first.chatId]);
  assert.deepEqual(await ids("?status=closed"), []);

  // Through another writer on the same database (as another instance or the CLI would).
  await close(db.sql, app.appId, first.chatId);
  const deadline = Date.now() + 2_000;
  while ((await ids("?status=closed")).length === 0) {
    assert.ok(Date.now() < deadline, "the change notice reached the listing");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.deepEqual(await ids("?status=closed"), [first.chatId]);
  assert.deepEqual(await ids("?status=open"), [second.chatId]);
});
