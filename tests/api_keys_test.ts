import assert from "node:assert/strict";
import { runCliProcess } from "./support/cli.ts";
import { createTestDatabase } from "./support/database.ts";
import { startTestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import type { Sql } from "../src/db/client.ts";
import { insertApplication } from "../src/db/applications.ts";
import type { ApiKeyListing } from "../src/db/api_keys.ts";
import { executeCommand, parseCommandLine } from "../src/cli.ts";

const KEY = /^parley_[0-9a-f]{48}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UNAUTHORIZED = { code: 401, message: "Invalid or missing API key" };
const MAX_KEYS_ERROR = "An application can have at most 10 active API keys";

interface CreatedKey {
  id: number;
  key: string;
  name: string | null;
}

type KeyListing = ApiKeyListing;

/** Runs a CLI command in this process and returns what it would print. */
async function run(sql: Sql, args: string[]): Promise<unknown> {
  return await executeCommand(sql, parseCommandLine(args));
}

async function createKey(sql: Sql, appId: number, name?: string): Promise<CreatedKey> {
  const args = ["key:create", "--app", String(appId)];
  if (name !== undefined) args.push("--name", name);
  return await run(sql, args) as CreatedKey;
}

async function listKeys(sql: Sql, appId: number): Promise<KeyListing[]> {
  return await run(sql, ["key:list", "--app", String(appId)]) as KeyListing[];
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

function randomWellFormedKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return `parley_${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function assertUnauthorized(res: Awaited<ReturnType<typeof apiCall>>, label: string): void {
  assert.equal(res.status, 401, label);
  assert.deepEqual(res.json, UNAUTHORIZED, label);
  assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="parley"', label);
  assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8", label);
}

Deno.test("key:create prints a parley_ key with 48 lowercase hex and its name", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");

  const named = await createKey(db.sql, app.id, "Production");
  assert.deepEqual(Object.keys(named).sort(), ["id", "key", "name"]);
  assert.match(named.key, KEY);
  assert.equal(named.name, "Production");
  assert.ok(Number.isInteger(named.id) && named.id > 0);

  const unnamed = await createKey(db.sql, app.id);
  assert.match(unnamed.key, KEY);
  assert.equal(unnamed.name, null);
  assert.notEqual(unnamed.id, named.id);
  assert.notEqual(unnamed.key, named.key);
});

Deno.test("key:list shows each key's 8-hex prefix and times, never the key", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const first = await createKey(db.sql, app.id, "first");
  const second = await createKey(db.sql, app.id);
  await createKey(db.sql, other.id, "not mine");

  const listed = await listKeys(db.sql, app.id);
  assert.deepEqual(listed.map((k) => k.id), [first.id, second.id]);
  for (const [listing, created] of [[listed[0], first], [listed[1], second]] as const) {
    assert.deepEqual(Object.keys(listing).sort(), [
      "created_at",
      "id",
      "last_used_at",
      "name",
      "prefix",
      "revoked_at",
    ]);
    assert.equal(listing.name, created.name);
    assert.equal(listing.prefix, created.key.slice("parley_".length, "parley_".length + 8));
    assert.match(listing.prefix, /^[0-9a-f]{8}$/);
    assert.match(listing.created_at, TIMESTAMP);
    assert.equal(listing.last_used_at, null);
    assert.equal(listing.revoked_at, null);
  }
  const printed = JSON.stringify(listed);
  for (const created of [first, second]) {
    assert.ok(!printed.includes(created.key), "key:list printed a key");
    assert.ok(!printed.includes(created.key.slice(7)), "key:list printed a key's hex");
  }
});

Deno.test("api_keys stores only the SHA-256 of a key, never its plaintext", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const created = await createKey(db.sql, app.id, "stored");

  const rows = await db.sql<{ row: string }[]>`SELECT k::text AS row FROM api_keys k`;
  assert.equal(rows.length, 1);
  const stored = rows[0].row;
  assert.ok(!stored.includes(created.key), `plaintext key stored: ${stored}`);
  assert.ok(!stored.includes(created.key.slice(7)), `the key's hex stored: ${stored}`);
  assert.ok(!stored.includes(created.key.slice(7, 31)), `half of the key's hex stored: ${stored}`);
  // What is stored instead is the key's SHA-256.
  assert.ok(stored.includes(await sha256Hex(created.key)), `no SHA-256 of the key: ${stored}`);
  const columns = await db.sql<{ column_name: string }[]>`
    SELECT column_name FROM information_schema.columns
    WHERE table_name = 'api_keys' AND table_schema = current_schema()
    ORDER BY column_name`;
  assert.ok(!columns.some((c) => /^(key|plaintext|secret|token)$/.test(c.column_name)));
});

Deno.test("key:revoke prints the id and revocation time; key:list shows it revoked", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const kept = await createKey(db.sql, app.id, "kept");
  const gone = await createKey(db.sql, app.id, "gone");

  const revoked = await run(db.sql, [
    "key:revoke",
    "--app",
    String(app.id),
    "--id",
    String(gone.id),
  ]) as { id: number; revoked_at: string };
  assert.deepEqual(Object.keys(revoked).sort(), ["id", "revoked_at"]);
  assert.equal(revoked.id, gone.id);
  assert.match(revoked.revoked_at, TIMESTAMP);

  const listed = await listKeys(db.sql, app.id);
  assert.equal(listed.find((k) => k.id === gone.id)?.revoked_at, revoked.revoked_at);
  assert.equal(listed.find((k) => k.id === kept.id)?.revoked_at, null);

  // Another application cannot revoke this application's key.
  await assert.rejects(
    run(db.sql, ["key:revoke", "--app", String(other.id), "--id", String(kept.id)]),
  );
  assert.equal((await listKeys(db.sql, app.id)).find((k) => k.id === kept.id)?.revoked_at, null);
});

Deno.test("the 11th active key is refused, and revoking a key frees its slot", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const keys: CreatedKey[] = [];
  for (let i = 0; i < 10; i++) keys.push(await createKey(db.sql, app.id, `key ${i}`));

  await assert.rejects(createKey(db.sql, app.id, "eleventh"), { message: MAX_KEYS_ERROR });
  assert.equal((await listKeys(db.sql, app.id)).length, 10);
  // The limit is per application.
  assert.match((await createKey(db.sql, other.id)).key, KEY);

  await run(db.sql, ["key:revoke", "--app", String(app.id), "--id", String(keys[3].id)]);
  const replacement = await createKey(db.sql, app.id, "replacement");
  assert.match(replacement.key, KEY);
  await assert.rejects(createKey(db.sql, app.id, "twelfth"), { message: MAX_KEYS_ERROR });
  const listed = await listKeys(db.sql, app.id);
  assert.equal(listed.length, 11);
  assert.equal(listed.filter((k) => k.revoked_at === null).length, 10);
});

Deno.test("concurrent key:create calls never leave more than 10 active keys", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const outcomes = await Promise.allSettled(
    Array.from({ length: 14 }, (_, i) => createKey(db.sql, app.id, `racer ${i}`)),
  );
  const created = outcomes.filter((o) => o.status === "fulfilled");
  const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
  assert.equal(created.length, 10);
  assert.equal(refused.length, 4);
  for (const r of refused) assert.equal((r.reason as Error).message, MAX_KEYS_ERROR);
  const [{ active }] = await db.sql<{ active: number }[]>`
    SELECT count(*)::int AS active FROM api_keys WHERE app_id = ${app.id} AND revoked_at IS NULL`;
  assert.equal(active, 10);
});

Deno.test("the cli process prints key:create's key once and key:list without it", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url };
  const app = await insertApplication(db.sql, "Acme");

  const created = await runCliProcess(["key:create", "--app", String(app.id), "--name", "CI"], env);
  assert.equal(created.code, 0, created.stderr);
  assert.equal(created.stderr, "");
  assert.equal(created.stdout.trim().split("\n").length, 1, "one JSON document");
  const key = JSON.parse(created.stdout) as CreatedKey;
  assert.deepEqual(Object.keys(key).sort(), ["id", "key", "name"]);
  assert.match(key.key, KEY);
  assert.equal(key.name, "CI");

  const listed = await runCliProcess(["key:list", "--app", String(app.id)], env);
  assert.equal(listed.code, 0, listed.stderr);
  assert.ok(!listed.stdout.includes(key.key.slice(7)), "key:list printed the key");
  const listing = JSON.parse(listed.stdout) as KeyListing[];
  assert.equal(listing.length, 1);
  assert.equal(listing[0].id, key.id);
  assert.equal(listing[0].name, "CI");
  assert.equal(listing[0].prefix, key.key.slice(7, 15));
  assert.equal(listing[0].last_used_at, null);
  assert.equal(listing[0].revoked_at, null);

  // The limit's error is the contract's JSON on stderr with exit 1.
  for (let i = 0; i < 9; i++) await createKey(db.sql, app.id);
  const refused = await runCliProcess(["key:create", "--app", String(app.id)], env);
  assert.equal(refused.code, 1);
  assert.equal(refused.stdout, "");
  assert.deepEqual(JSON.parse(refused.stderr), { error: MAX_KEYS_ERROR });
});

Deno.test("a Bearer key authenticates whatever the scheme's case, and X-Api-Key alone does too", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);

  const variants: [string, Record<string, string>][] = [
    ["Bearer", { authorization: `Bearer ${app.key}` }],
    ["bearer", { authorization: `bearer ${app.key}` }],
    ["BEARER", { authorization: `BEARER ${app.key}` }],
    ["X-Api-Key", { "x-api-key": app.key }],
  ];
  for (const [label, headers] of variants) {
    const res = await apiCall(server.baseUrl, "/conversations", { headers });
    assert.equal(res.status, 200, `${label}: ${JSON.stringify(res.json)}`);
    assert.equal(res.json.code, 0, label);
    assert.deepEqual(res.json.data.map((c: { id: number }) => c.id), [chat.chatId], label);
  }
});

Deno.test("Authorization: Bearer wins over X-Api-Key; another scheme falls back to X-Api-Key", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const mine = await createKeyedApp(db.sql, "Mine");
  const theirs = await createKeyedApp(db.sql, "Theirs");
  const myChat = await createVisitorChat(server.baseUrl, mine.publicId);
  const theirChat = await createVisitorChat(server.baseUrl, theirs.publicId);
  const ids = (res: Awaited<ReturnType<typeof apiCall>>) =>
    res.json.data.map((c: { id: number }) => c.id);

  const both = await apiCall(server.baseUrl, "/conversations", {
    headers: { authorization: `Bearer ${mine.key}`, "x-api-key": theirs.key },
  });
  assert.equal(both.status, 200);
  assert.deepEqual(ids(both), [myChat.chatId], "the Bearer key's application is the caller");

  const wrongBearer = await apiCall(server.baseUrl, "/conversations", {
    headers: { authorization: `Bearer ${randomWellFormedKey()}`, "x-api-key": mine.key },
  });
  assertUnauthorized(wrongBearer, "wrong Bearer with a good X-Api-Key");

  const malformedBearer = await apiCall(server.baseUrl, "/conversations", {
    headers: { authorization: "Bearer parley_xyz", "x-api-key": mine.key },
  });
  assertUnauthorized(malformedBearer, "malformed Bearer with a good X-Api-Key");

  const basic = await apiCall(server.baseUrl, "/conversations", {
    headers: { authorization: `Basic ${btoa("user:password")}`, "x-api-key": theirs.key },
  });
  assert.equal(basic.status, 200, JSON.stringify(basic.json));
  assert.deepEqual(ids(basic), [theirChat.chatId], "Basic falls back to X-Api-Key");
});

Deno.test("missing, malformed, unknown and revoked keys are 401 with WWW-Authenticate", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const revoked = await createKey(db.sql, app.appId, "revoked before use");
  await run(db.sql, ["key:revoke", "--app", String(app.appId), "--id", String(revoked.id)]);

  const cases: [string, Record<string, string>][] = [
    ["no key", {}],
    ["malformed Bearer", { authorization: "Bearer parley_xyz" }],
    ["malformed X-Api-Key", { "x-api-key": "parley_xyz" }],
    ["key in upper case", { authorization: `Bearer ${app.key.toUpperCase()}` }],
    ["key with a trailing character", { authorization: `Bearer ${app.key}0` }],
    ["unknown Bearer", { authorization: `Bearer ${randomWellFormedKey()}` }],
    ["unknown X-Api-Key", { "x-api-key": randomWellFormedKey() }],
    ["revoked Bearer", { authorization: `Bearer ${revoked.key}` }],
    ["revoked X-Api-Key", { "x-api-key": revoked.key }],
    ["Basic without X-Api-Key", { authorization: `Basic ${btoa("user:password")}` }],
  ];
  for (const [label, headers] of cases) {
    assertUnauthorized(await apiCall(server.baseUrl, "/conversations", { headers }), label);
  }
  // Authentication comes before routing and validation.
  assertUnauthorized(await apiCall(server.baseUrl, "/messages", { json: {} }), "POST /messages");
  assertUnauthorized(await apiCall(server.baseUrl, "/no-such-route"), "unknown route");
  assertUnauthorized(
    await apiCall(server.baseUrl, "/conversations", { method: "DELETE" }),
    "wrong method",
  );
  // The good key of the same application still works.
  assert.equal((await apiCall(server.baseUrl, "/conversations", { key: app.key })).status, 200);
});

Deno.test("a revoked key is refused within a second on every instance", async () => {
  await using db = await createTestDatabase();
  await using a = await startTestServer(db.url);
  await using b = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const created = await createKey(db.sql, app.appId, "to revoke");

  // Both instances have just looked the key up (and may cache it).
  for (const server of [a, b]) {
    assert.equal(
      (await apiCall(server.baseUrl, "/conversations", { key: created.key })).status,
      200,
    );
  }
  await run(db.sql, ["key:revoke", "--app", String(app.appId), "--id", String(created.id)]);
  await sleep(1100);
  for (const [label, server] of [["a", a], ["b", b]] as const) {
    assertUnauthorized(
      await apiCall(server.baseUrl, "/conversations", { key: created.key }),
      `instance ${label}, Bearer`,
    );
    assertUnauthorized(
      await apiCall(server.baseUrl, "/conversations", { headers: { "x-api-key": created.key } }),
      `instance ${label}, X-Api-Key`,
    );
  }
  // Only that key: the application's other key still works on both.
  for (const server of [a, b]) {
    assert.equal((await apiCall(server.baseUrl, "/conversations", { key: app.key })).status, 200);
  }
});

Deno.test("last_used_at is set on first use and written at most once a minute", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await insertApplication(db.sql, "Acme");
  const created = await createKey(db.sql, app.id, "tracked");
  const lastUsed = async () =>
    (await listKeys(db.sql, app.id)).find((k) => k.id === created.id)!.last_used_at;
  const use = async () => {
    const res = await apiCall(server.baseUrl, "/conversations", { key: created.key });
    assert.equal(res.status, 200, JSON.stringify(res.json));
  };
  assert.equal(await lastUsed(), null);

  const before = new Date().toISOString();
  await use();
  const first = await lastUsed();
  assert.ok(first !== null, "last_used_at not set on first use");
  assert.match(first, TIMESTAMP);
  assert.ok(first.slice(0, 23) >= before.slice(0, 23), `${first} is before the use ${before}`);

  // Used again, past any lookup cache, within the minute: the stored time does not move.
  await use();
  await sleep(1100);
  await use();
  assert.equal(await lastUsed(), first);

  // Once the last write is over a minute old, the next use writes again.
  const [{ aged }] = await db.sql<{ aged: string }[]>`
    UPDATE api_keys SET last_used_at = clock_timestamp() - interval '2 minutes'
    WHERE id = ${created.id} RETURNING last_used_at AS aged`;
  await sleep(1100);
  const beforeSecond = new Date().toISOString();
  await use();
  const second = await lastUsed();
  assert.ok(second !== null);
  assert.notEqual(second, aged, "last_used_at not updated after a minute");
  assert.ok(second.slice(0, 23) >= beforeSecond.slice(0, 23), `${second} is too old`);
});
