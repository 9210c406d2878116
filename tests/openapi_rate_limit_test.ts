import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { spawnServer, startTestServer } from "./support/server.ts";
import { type ApiAnswer, apiCall, createKeyedApp, createVisitorChat } from "./support/open_api.ts";
import { insertApiKey } from "../src/db/api_keys.ts";
import { newApiKey, sha256Bytes } from "../src/crypto/tokens.ts";
import type { Sql } from "../src/db/client.ts";

const RATE_LIMITED = { code: 429, message: "Rate limit exceeded" };

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Windows are aligned to the wall-clock minute: a test that counts to a limit must not straddle
 * two of them, so with less than `ms` left in this minute it waits for the next one.
 */
async function waitForRoomInMinute(ms = 8_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < ms) await sleep(left + 250);
}

/** A second active key of application `appId`. */
async function addKey(sql: Sql, appId: number): Promise<string> {
  const key = newApiKey();
  const id = await insertApiKey(sql, {
    appId,
    name: "second",
    keyHash: sha256Bytes(key),
    prefix: key.slice(7, 15),
  });
  assert.ok(id !== null);
  return key;
}

/**
 * Checks the rate-limit headers of one answer against `limit` and, when given, the expected
 * remaining count; returns the remaining count.
 */
function assertRateLimitHeaders(
  res: ApiAnswer,
  limit: number,
  label: string,
  expectedRemaining?: number,
): number {
  const nowSeconds = Date.now() / 1000;
  const header = (name: string) => {
    const value = res.headers.get(name);
    assert.ok(value !== null, `${label}: no ${name}`);
    return value;
  };
  assert.equal(header("x-ratelimit-limit"), String(limit), label);
  const remainingText = header("x-ratelimit-remaining");
  assert.match(remainingText, /^\d+$/, `${label}: remaining is not a non-negative integer`);
  const remaining = Number(remainingText);
  assert.ok(remaining <= limit, `${label}: remaining ${remaining} over the limit`);
  if (expectedRemaining !== undefined) assert.equal(remaining, expectedRemaining, label);

  const resetText = header("x-ratelimit-reset");
  assert.match(resetText, /^\d+$/, label);
  const reset = Number(resetText);
  assert.equal(reset % 60, 0, `${label}: reset ${reset} is not a minute boundary`);
  assert.ok(
    reset > nowSeconds - 1 && reset <= nowSeconds + 61,
    `${label}: reset ${reset} is not the end of the current minute (now ${nowSeconds})`,
  );

  assert.equal(header("ratelimit-policy"), `"default";q=${limit};w=60`, label);
  const draft = /^"default";r=(\d+);t=(\d+)$/.exec(header("ratelimit"));
  assert.ok(draft, `${label}: RateLimit is ${res.headers.get("ratelimit")}`);
  assert.equal(Number(draft[1]), remaining, `${label}: RateLimit r differs from remaining`);
  const t = Number(draft[2]);
  assert.ok(t >= 1 && t <= 60, `${label}: t=${t}`);
  assert.ok(Math.abs(t - (reset - nowSeconds)) <= 1.5, `${label}: t=${t} for reset ${reset}`);
  return remaining;
}

function assertRateLimited(res: ApiAnswer, limit: number, label: string): void {
  assert.equal(res.status, 429, `${label}: ${JSON.stringify(res.json)}`);
  assert.deepEqual(res.json, RATE_LIMITED, label);
  assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8", label);
  assertRateLimitHeaders(res, limit, label, 0);
  const retryAfter = res.headers.get("retry-after");
  assert.ok(retryAfter !== null, `${label}: no Retry-After`);
  assert.match(retryAfter, /^\d+$/, `${label}: Retry-After is not whole seconds`);
  const seconds = Number(retryAfter);
  assert.ok(seconds >= 1 && seconds <= 60, `${label}: Retry-After ${seconds}`);
  const untilReset = Number(res.headers.get("x-ratelimit-reset")) - Date.now() / 1000;
  assert.ok(
    Math.abs(seconds - untilReset) <= 1.5,
    `${label}: Retry-After ${seconds} but the window resets in ${untilReset}s`,
  );
}

Deno.test("every Open API answer carries the rate-limit headers of the default limit, errors included", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url);
  const app = await createKeyedApp(db.sql);
  const chat = await createVisitorChat(server.baseUrl, app.publicId);
  await waitForRoomInMinute();

  // One Bearer bucket: every answer, whatever its status, counts one request.
  const key = app.key;
  const calls: [string, number, () => Promise<ApiAnswer>][] = [
    ["list", 200, () => apiCall(server.baseUrl, "/conversations", { key })],
    ["one", 200, () => apiCall(server.baseUrl, `/conversations/${chat.chatId}`, { key })],
    ["unknown route", 404, () => apiCall(server.baseUrl, "/nope", { key })],
    ["wrong method", 405, () => apiCall(server.baseUrl, "/conversations", { key, method: "PUT" })],
    ["bad status", 400, () => apiCall(server.baseUrl, "/conversations?status=other", { key })],
    ["unknown conversation", 404, () => apiCall(server.baseUrl, "/conversations/999999", { key })],
    ["send", 200, () =>
      apiCall(server.baseUrl, "/messages", {
        key,
        json: { chat_id: chat.chatId, content: "Hi" },
      })],
    ["document", 200, () => apiCall(server.baseUrl, "/openapi.json", { key })],
  ];
  let expected = 120;
  for (const [label, status, call] of calls) {
    const res = await call();
    assert.equal(res.status, status, `${label}: ${JSON.stringify(res.json)}`);
    expected--;
    assertRateLimitHeaders(res, 120, label, expected);
  }

  // The IP bucket (no Bearer header): a 401 carries the headers too, and counts.
  const noKey = await apiCall(server.baseUrl, "/conversations");
  assert.equal(noKey.status, 401);
  assertRateLimitHeaders(noKey, 120, "401", 119);
  const viaHeader = await apiCall(server.baseUrl, "/conversations", {
    headers: { "x-api-key": app.key },
  });
  assert.equal(viaHeader.status, 200);
  assertRateLimitHeaders(viaHeader, 120, "X-Api-Key", 118);
});

Deno.test("while its counts cannot be written the limit holds in memory and answers keep their headers", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "3" });
  const app = await createKeyedApp(db.sql);
  await waitForRoomInMinute();
  const list = () => apiCall(server.baseUrl, "/conversations", { key: app.key });
  assertRateLimitHeaders(await list(), 3, "counted in PostgreSQL", 2);

  await db.sql`ALTER TABLE rate_limits RENAME TO rate_limits_away`;
  try {
    const during = await list();
    assert.equal(during.status, 200, JSON.stringify(during.json));
    assertRateLimitHeaders(during, 3, "counted in memory", 1);
    assertRateLimitHeaders(await list(), 3, "counted in memory", 0);
    assertRateLimited(await list(), 3, "over the limit in memory");
  } finally {
    await db.sql`ALTER TABLE rate_limits_away RENAME TO rate_limits`;
  }
  // PostgreSQL counts again from what it had (the outage's hits were never written).
  assertRateLimitHeaders(await list(), 3, "counted in PostgreSQL again", 1);
});

Deno.test("a bucket over its limit gets 429 with Retry-After while other buckets go on", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "3" });
  const app = await createKeyedApp(db.sql);
  const otherKey = await addKey(db.sql, app.appId);
  await waitForRoomInMinute();

  for (const expected of [2, 1, 0]) {
    const res = await apiCall(server.baseUrl, "/conversations", { key: app.key });
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assertRateLimitHeaders(res, 3, `within the limit, ${expected} left`, expected);
  }
  assertRateLimited(await apiCall(server.baseUrl, "/conversations", { key: app.key }), 3, "4th");
  // Still 0 remaining, never negative, however far over.
  assertRateLimited(await apiCall(server.baseUrl, "/conversations", { key: app.key }), 3, "5th");

  // Another Bearer key is another bucket.
  const other = await apiCall(server.baseUrl, "/conversations", { key: otherKey });
  assert.equal(other.status, 200);
  assertRateLimitHeaders(other, 3, "other key", 2);
  // The bucket is the exact credential: another spelling of the scheme names the same key and
  // shares its count, and a key padded with more spaces is no key (a bucket of its own, but 401).
  for (const scheme of ["bearer", "BEARER", "bEaReR"]) {
    assertRateLimited(
      await apiCall(server.baseUrl, "/conversations", {
        headers: { authorization: `${scheme} ${app.key}` },
      }),
      3,
      `${scheme} spelling`,
    );
  }
  for (const padding of [" ", "  ", "\t"]) {
    const padded = await apiCall(server.baseUrl, "/conversations", {
      headers: { authorization: `Bearer ${padding}${app.key}` },
    });
    assert.equal(padded.status, 401, JSON.stringify(padding));
    assert.deepEqual(padded.json, { code: 401, message: "Invalid or missing API key" });
    assertRateLimitHeaders(padded, 3, `padded with ${JSON.stringify(padding)}`, 2);
  }
  // The same key in X-Api-Key only is counted by client IP, not by key.
  const viaHeader = await apiCall(server.baseUrl, "/conversations", {
    headers: { "x-api-key": app.key },
  });
  assert.equal(viaHeader.status, 200);
  assertRateLimitHeaders(viaHeader, 3, "X-Api-Key", 2);
});

Deno.test("401s and 404s count, and over the limit a request without a key is 429, not 401", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "3" });
  const app = await createKeyedApp(db.sql);
  await waitForRoomInMinute();
  const viaHeader = { "x-api-key": app.key };

  const noKey = await apiCall(server.baseUrl, "/conversations");
  assert.equal(noKey.status, 401);
  assertRateLimitHeaders(noKey, 3, "401", 2);
  const unknownRoute = await apiCall(server.baseUrl, "/nope", { headers: viaHeader });
  assert.equal(unknownRoute.status, 404);
  assert.deepEqual(unknownRoute.json, { code: 404, message: "Not found" });
  assertRateLimitHeaders(unknownRoute, 3, "404", 1);
  const wrongMethod = await apiCall(server.baseUrl, "/messages", { headers: viaHeader });
  assert.equal(wrongMethod.status, 405);
  assert.deepEqual(wrongMethod.json, { code: 405, message: "Method not allowed" });
  assertRateLimitHeaders(wrongMethod, 3, "405", 0);

  // The IP bucket is spent: the rate limit is checked before the key, the route and the body.
  assertRateLimited(await apiCall(server.baseUrl, "/conversations"), 3, "no key");
  assertRateLimited(
    await apiCall(server.baseUrl, "/conversations", { headers: { "x-api-key": "parley_xyz" } }),
    3,
    "malformed key",
  );
  assertRateLimited(
    await apiCall(server.baseUrl, "/conversations", { headers: viaHeader }),
    3,
    "good X-Api-Key",
  );
  assertRateLimited(
    await apiCall(server.baseUrl, "/messages", { headers: viaHeader, json: {} }),
    3,
    "invalid body",
  );
  assertRateLimited(await apiCall(server.baseUrl, "/nope"), 3, "unknown route");
  // A Bearer key has its own bucket, still full.
  const bearer = await apiCall(server.baseUrl, "/conversations", { key: app.key });
  assert.equal(bearer.status, 200);
  assertRateLimitHeaders(bearer, 3, "Bearer", 2);
});

Deno.test("a wrong Bearer key is counted in its own bucket and 429 once over the limit", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "2" });
  const app = await createKeyedApp(db.sql);
  await waitForRoomInMinute();
  const wrong = { authorization: "Bearer parley_wrong" };

  for (const expected of [1, 0]) {
    const res = await apiCall(server.baseUrl, "/conversations", { headers: wrong });
    assert.equal(res.status, 401);
    assertRateLimitHeaders(res, 2, "wrong Bearer", expected);
  }
  assertRateLimited(await apiCall(server.baseUrl, "/conversations", { headers: wrong }), 2, "3rd");
  // Neither the IP bucket nor the good key's bucket was touched.
  const viaHeader = await apiCall(server.baseUrl, "/conversations", {
    headers: { "x-api-key": app.key },
  });
  assertRateLimitHeaders(viaHeader, 2, "IP bucket", 1);
  const good = await apiCall(server.baseUrl, "/conversations", { key: app.key });
  assertRateLimitHeaders(good, 2, "good key", 1);
});

Deno.test("with TRUST_PROXY=1 the left-most X-Forwarded-For entry is the client IP", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, {
    RATE_LIMIT_PER_MINUTE: "2",
    TRUST_PROXY: "1",
  });
  const app = await createKeyedApp(db.sql);
  await waitForRoomInMinute();
  const from = (forwardedFor: string) =>
    apiCall(server.baseUrl, "/conversations", {
      headers: { "x-api-key": app.key, "x-forwarded-for": forwardedFor },
    });

  for (const expected of [1, 0]) {
    const res = await from("203.0.113.7");
    assert.equal(res.status, 200);
    assertRateLimitHeaders(res, 2, "first client", expected);
  }
  // Proxies that appended their peers after the client's address change nothing.
  assertRateLimited(await from("203.0.113.7, 10.0.0.99"), 2, "first client, through a proxy");
  assertRateLimited(await from(" 203.0.113.7 ,198.51.100.1,10.0.0.1"), 2, "through two proxies");
  // Another original client.
  const second = await from("198.51.100.9, 203.0.113.7");
  assert.equal(second.status, 200);
  assertRateLimitHeaders(second, 2, "second client", 1);
  // No header: the peer address is its own bucket.
  const direct = await apiCall(server.baseUrl, "/conversations", {
    headers: { "x-api-key": app.key },
  });
  assert.equal(direct.status, 200);
  assertRateLimitHeaders(direct, 2, "direct", 1);
});

Deno.test("without TRUST_PROXY, X-Forwarded-For does not change the bucket", async () => {
  await using db = await createTestDatabase();
  await using server = await startTestServer(db.url, { RATE_LIMIT_PER_MINUTE: "2" });
  const app = await createKeyedApp(db.sql);
  await waitForRoomInMinute();
  const from = (forwardedFor: string) =>
    apiCall(server.baseUrl, "/conversations", {
      headers: { "x-api-key": app.key, "x-forwarded-for": forwardedFor },
    });

  assertRateLimitHeaders(await from("203.0.113.1"), 2, "first", 1);
  assertRateLimitHeaders(await from("203.0.113.2"), 2, "second", 0);
  assertRateLimited(await from("203.0.113.3"), 2, "third address, same peer");
});

Deno.test("two server processes on one database enforce one exact limit", async () => {
  await using db = await createTestDatabase();
  // At "warn" the request lines go quiet; the "listening" line that spawnServer waits for stays.
  const env = { DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: "20", LOG_LEVEL: "warn" };
  await using a = await spawnServer(env);
  await using b = await spawnServer(env);
  const app = await createKeyedApp(db.sql);
  const burstKey = await addKey(db.sql, app.appId);
  const limit = 20;
  const instances = [a, b];
  await waitForRoomInMinute();

  // Exactly the limit's worth, alternating between the instances, five at a time concurrently.
  const answers: ApiAnswer[] = [];
  for (let batch = 0; batch < limit / 5; batch++) {
    answers.push(
      ...await Promise.all(
        Array.from(
          { length: 5 },
          (_, i) => apiCall(instances[i % 2].baseUrl, "/conversations", { key: app.key }),
        ),
      ),
    );
  }
  assert.deepEqual(answers.map((r) => r.status), Array(limit).fill(200));
  // Each request saw its own count: the remaining values are 19..0, each exactly once.
  const remaining = answers.map((r, i) => assertRateLimitHeaders(r, limit, `request ${i}`));
  assert.deepEqual(
    remaining.toSorted((x, y) => y - x),
    Array.from({ length: limit }, (_, i) => 19 - i),
  );
  assertRateLimited(await apiCall(a.baseUrl, "/conversations", { key: app.key }), limit, "a");
  assertRateLimited(await apiCall(b.baseUrl, "/conversations", { key: app.key }), limit, "b");

  // A burst of 30 at once over both instances: exactly the limit's worth get through.
  const burst = await Promise.all(
    Array.from(
      { length: 30 },
      (_, i) => apiCall(instances[i % 2].baseUrl, "/conversations", { key: burstKey }),
    ),
  );
  const statuses = burst.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, limit, JSON.stringify(statuses));
  assert.equal(statuses.filter((s) => s === 429).length, 30 - limit, JSON.stringify(statuses));
  for (const [i, res] of burst.entries()) {
    if (res.status === 429) assertRateLimited(res, limit, `burst ${i}`);
  }

  assert.equal((await a.stop()).code, 0);
  assert.equal((await b.stop()).code, 0);
});
