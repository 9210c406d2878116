import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { spawnServer } from "./support/server.ts";
import { eventually } from "./support/eventually.ts";
import { insertApplication } from "../src/db/applications.ts";

async function post(url: string, body: unknown, token?: string) {
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

Deno.test("a message committed through one instance reaches a socket held by another", async () => {
  await using db = await createTestDatabase();
  await using a = await spawnServer({ DATABASE_URL: db.url });
  await using b = await spawnServer({ DATABASE_URL: db.url });
  const app = await insertApplication(db.sql, "Acme");
  const visitor = (await post(`${a.baseUrl}/api/v1/widget/${app.public_id}/visitors`, {})).json
    .data;

  const socket = new WebSocket(
    `${a.baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=${visitor.visitor_token}`,
  );
  const frames: { type: string; message?: { id: number; content: string } }[] = [];
  socket.onmessage = (event) => frames.push(JSON.parse(event.data));
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  try {
    const sent: number[] = [];
    for (let i = 0; i < 20; i++) {
      const via = i % 2 === 0 ? b : a;
      const res = await post(
        `${via.baseUrl}/api/v1/widget/messages`,
        { content: `message ${i}` },
        visitor.visitor_token,
      );
      assert.equal(res.status, 200, JSON.stringify(res.json));
      sent.push(res.json.data.message_id);
    }
    const created = () => frames.filter((f) => f.type === "message.created");
    for (let i = 0; i < 250 && created().length < sent.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(created().map((f) => f.message?.id), sent);
    assert.deepEqual(
      created().map((f) => f.message?.content),
      sent.map((_, i) => `message ${i}`),
    );
  } finally {
    const closed = new Promise((resolve) => socket.onclose = resolve);
    socket.close();
    await closed;
  }
  assert.equal((await a.stop()).code, 0);
  assert.equal((await b.stop()).code, 0);
});

Deno.test("instances share widget rate-limit counts through the database", async () => {
  await using db = await createTestDatabase();
  const env = { DATABASE_URL: db.url, WIDGET_RATE_LIMIT_PER_MINUTE: "3" };
  await using a = await spawnServer(env);
  await using b = await spawnServer(env);
  const app = await insertApplication(db.sql, "Acme");
  const [row] = await db.sql`SELECT extract(second FROM clock_timestamp())::float AS s`;
  if (row.s > 50) await new Promise((resolve) => setTimeout(resolve, (61 - row.s) * 1000));
  const visitor = (await post(`${a.baseUrl}/api/v1/widget/${app.public_id}/visitors`, {})).json
    .data;
  const statuses: number[] = [];
  for (let i = 0; i < 2; i++) {
    statuses.push(
      (await post(`${a.baseUrl}/api/v1/widget/messages`, { content: "hi" }, visitor.visitor_token))
        .status,
    );
  }
  const viaB = async () =>
    (await post(`${b.baseUrl}/api/v1/widget/messages`, { content: "hi" }, visitor.visitor_token))
      .status;
  // The visitor's bucket's count in the database, however long the syncs take on a busy machine.
  const counted = (n: number) =>
    eventually(
      () => db.sql`SELECT coalesce(max(count), 0)::int AS n FROM rate_limits`,
      ([row]) => row.n >= n,
      `a count of ${n} in the database`,
      10_000,
    );
  await counted(2); // a's counts reach the database
  statuses.push(await viaB()); // b counts it as its first, then learns the total of 3 on sync
  await counted(3);
  await new Promise((resolve) => setTimeout(resolve, 400)); // b has read the total it wrote
  statuses.push(await viaB()); // the fourth in this window, whichever instance got the others
  assert.deepEqual(statuses, [200, 200, 200, 429]);
  assert.equal((await a.stop()).code, 0);
  assert.equal((await b.stop()).code, 0);
});
