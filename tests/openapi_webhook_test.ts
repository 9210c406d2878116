import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer, TEST_ENCRYPTION_KEY } from "./support/server.ts";
import { apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import { createSecretBox } from "../src/crypto/secret_box.ts";
import type { Resolver } from "../src/webhooks/ssrf_guard.ts";

const DNS: Record<string, string[]> = {
  "hooks.example.com": ["93.184.216.34"],
  "other.example.com": ["2606:2800:220:1:248:1893:25c8:1946"],
  "internal.example.com": ["10.0.0.7"],
  "mixed.example.com": ["93.184.216.34", "169.254.169.254"],
  "hooks.test": ["127.0.0.1"],
};

const fakeDns: Resolver = (name) => Promise.resolve(DNS[name.toLowerCase()] ?? []);

const UNSAFE = "url must be an https URL that resolves to a public address";

function testBox() {
  return createSecretBox(Uint8Array.from(atob(TEST_ENCRYPTION_KEY), (c) => c.charCodeAt(0)));
}

Deno.test("GET /webhook of an application that never configured one is blank and disabled", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {}, { resolveHost: fakeDns });
  const app = await createKeyedApp(db.sql);
  const res = await apiCall(server.baseUrl, "/webhook", { key: app.key });
  assert.equal(res.status, 200);
  assert.deepEqual(res.json, { code: 0, data: { url: "", events: [], enabled: false } });
});

Deno.test("PUT /webhook replaces the whole configuration and keeps one secret, stored sealed", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {}, { resolveHost: fakeDns });
  const app = await createKeyedApp(db.sql);
  const put = (json: unknown) =>
    apiCall(server.baseUrl, "/webhook", { method: "PUT", key: app.key, json });

  const first = await put({
    url: "https://hooks.example.com/parley",
    events: ["message.sent", "bogus", "chat.started", "message.sent"],
  });
  assert.equal(first.status, 200, JSON.stringify(first.json));
  const { secret, ...config } = first.json.data;
  assert.match(secret, /^whsec_[0-9a-f]{64}$/);
  assert.deepEqual(config, {
    url: "https://hooks.example.com/parley",
    events: ["chat.started", "message.sent"],
    enabled: true,
  });
  const shown = await apiCall(server.baseUrl, "/webhook", { key: app.key });
  assert.deepEqual(shown.json.data, config, "GET never shows the secret");

  const [row] = await db.sql`SELECT secret_encrypted FROM webhooks WHERE app_id = ${app.appId}`;
  assert.match(row.secret_encrypted, /^v1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
  assert.ok(!row.secret_encrypted.includes(secret.slice(6)));
  assert.equal(testBox().open(row.secret_encrypted), secret);

  const second = await put({ url: "https://other.example.com/h", enabled: false });
  assert.deepEqual(second.json.data, {
    url: "https://other.example.com/h",
    events: [],
    enabled: false,
    secret,
  });
  const cleared = await put({});
  assert.deepEqual(cleared.json.data, { url: "", events: [], enabled: false, secret });
  const blank = await put({ url: "   ", events: ["chat.ended"], enabled: true });
  assert.deepEqual(blank.json.data, { url: "", events: ["chat.ended"], enabled: false, secret });
});

Deno.test("PUT /webhook refuses unsafe urls and malformed bodies and changes nothing", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {}, { resolveHost: fakeDns });
  const app = await createKeyedApp(db.sql);
  const put = (init: { json?: unknown; raw?: string; type?: string }) =>
    apiCall(server.baseUrl, "/webhook", {
      method: "PUT",
      key: app.key,
      ...(init.json !== undefined ? { json: init.json } : {}),
      ...(init.raw !== undefined ? { raw: init.raw, headers: { "content-type": init.type! } } : {}),
    });
  const good = await put({ json: { url: "https://hooks.example.com/", events: ["chat.ended"] } });
  assert.equal(good.status, 200);

  const cases: [string, { json?: unknown; raw?: string; type?: string }, number, string][] = [
    ["http", { json: { url: "http://hooks.example.com/" } }, 400, UNSAFE],
    ["userinfo", { json: { url: "https://a:b@hooks.example.com/" } }, 400, UNSAFE],
    ["private name", { json: { url: "https://internal.example.com/" } }, 400, UNSAFE],
    ["one private address", { json: { url: "https://mixed.example.com/" } }, 400, UNSAFE],
    ["unresolvable", { json: { url: "https://nowhere.example.com/" } }, 400, UNSAFE],
    ["loopback literal", { json: { url: "https://2130706433/" } }, 400, UNSAFE],
    ["metadata literal", { json: { url: "https://169.254.169.254/latest" } }, 400, UNSAFE],
    ["not a url", { json: { url: "hooks" } }, 400, UNSAFE],
    ["CR/LF at the end", { json: { url: "https://hooks.example.com/\r\n" } }, 400, UNSAFE],
    ["tab ahead", { json: { url: "\thttps://hooks.example.com/" } }, 400, UNSAFE],
    ["array body", { json: [] }, 400, "Invalid webhook configuration: body must be a JSON object"],
    [
      "url number",
      { json: { url: 1 } },
      400,
      "Invalid webhook configuration: url must be a string",
    ],
    [
      "events string",
      { json: { events: "chat.ended" } },
      400,
      "Invalid webhook configuration: events must be an array of strings",
    ],
    [
      "enabled string",
      { json: { enabled: "yes" } },
      400,
      "Invalid webhook configuration: enabled must be a boolean",
    ],
    ["broken JSON", { raw: "{", type: "application/json" }, 400, "Invalid JSON body"],
    [
      "form body",
      { raw: "url=x", type: "application/x-www-form-urlencoded" },
      415,
      "Unsupported content type",
    ],
  ];
  for (const [name, init, status, message] of cases) {
    const res = await put(init);
    assert.equal(res.status, status, `${name}: ${JSON.stringify(res.json)}`);
    assert.deepEqual(res.json, { code: status, message }, name);
  }
  const after = await apiCall(server.baseUrl, "/webhook", { key: app.key });
  assert.deepEqual(after.json.data, {
    url: "https://hooks.example.com/",
    events: ["chat.ended"],
    enabled: true,
  });
});

Deno.test("WEBHOOK_ALLOW_PRIVATE_HOSTS exempts only the hosts it names", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "hooks.test",
  }, { resolveHost: fakeDns });
  const app = await createKeyedApp(db.sql);
  const put = (url: string) =>
    apiCall(server.baseUrl, "/webhook", { method: "PUT", key: app.key, json: { url } });
  assert.equal((await put("https://hooks.test:8443/in")).status, 200);
  assert.equal((await put("https://internal.example.com/")).status, 400);
});

Deno.test("a webhook configuration belongs to its application and decides its outbox rows", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {}, { resolveHost: fakeDns });
  const a = await createKeyedApp(db.sql, "A");
  const b = await createKeyedApp(db.sql, "B");
  const put = (json: unknown) =>
    apiCall(server.baseUrl, "/webhook", { method: "PUT", key: a.key, json });
  await put({ url: "https://hooks.example.com/", events: ["message.sent", "message.received"] });
  const bView = await apiCall(server.baseUrl, "/webhook", { key: b.key });
  assert.deepEqual(bView.json.data, { url: "", events: [], enabled: false });

  const chat = await createVisitorChat(server.baseUrl, a.publicId);
  const reply = (content: string) =>
    apiCall(server.baseUrl, "/messages", {
      key: a.key,
      json: { chat_id: chat.chatId, content },
    });
  await reply("subscribed");
  await put({ url: "https://hooks.example.com/", events: ["message.sent"], enabled: false });
  await reply("disabled");
  const topics = await db.sql`SELECT topic FROM outbox WHERE app_id = ${a.appId} ORDER BY id`;
  assert.deepEqual(topics.map((r) => r.topic), ["message.received", "message.sent"]);
});
