import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { delay, waitUntil } from "./support/realtime.ts";
import { CHANGES_CHANNEL } from "../src/domain/change_notice.ts";
import { listenForChanges } from "../src/realtime/listener.ts";
import type { Sql } from "../src/db/client.ts";

async function notify(sql: Sql, ...payloads: string[]): Promise<void> {
  await sql`SELECT pg_notify(${CHANGES_CHANNEL}, p) FROM unnest(${payloads}::text[]) AS p`;
}

async function terminateListen(sql: Sql): Promise<number> {
  const rows = await sql`
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND query ILIKE 'listen%' AND pid <> pg_backend_pid()`;
  return rows.length;
}

Deno.test("listenForChanges delivers payloads in order and reports only later listens as reconnects", async () => {
  await using db = await createTestDatabase();
  const events: string[] = [];
  const listener = await listenForChanges({
    sql: db.sql,
    onNotice: (payload) => events.push(payload),
    onReconnect: () => events.push("reconnect"),
  });
  try {
    await notify(db.sql, "1", "2", "3");
    await waitUntil(() => events.length === 3, "three payloads");
    assert.deepEqual(events, ["1", "2", "3"]);

    assert.equal(await terminateListen(db.sql), 1);
    await waitUntil(() => events.includes("reconnect"), "the reconnect");
    await notify(db.sql, "4");
    await waitUntil(() => events.includes("4"), "a payload after the reconnect");
    assert.deepEqual(events, ["1", "2", "3", "reconnect", "4"]);
  } finally {
    await listener.stop();
  }
  await notify(db.sql, "5");
  await delay(100);
  assert.equal(events.includes("5"), false);
});

Deno.test("listenForChanges reports a throwing callback and keeps listening", async () => {
  await using db = await createTestDatabase();
  const received: string[] = [];
  const errors: unknown[] = [];
  const listener = await listenForChanges({
    sql: db.sql,
    onNotice(payload) {
      if (payload === "bad") throw new Error("Boom");
      received.push(payload);
    },
    onReconnect() {},
    onError: (error) => errors.push(error),
  });
  try {
    await notify(db.sql, "bad");
    await notify(db.sql, "good");
    await waitUntil(() => received.length === 1, "the payload after the throw");
    assert.deepEqual(received, ["good"]);
    assert.equal(errors.length, 1);
  } finally {
    await listener.stop();
  }
});

Deno.test("listenForChanges keeps one LISTEN connection per pool", async () => {
  await using db = await createTestDatabase();
  const first = await listenForChanges({ sql: db.sql, onNotice() {}, onReconnect() {} });
  const second = await listenForChanges({ sql: db.sql, onNotice() {}, onReconnect() {} });
  try {
    const [{ count }] = await db.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM pg_stat_activity
      WHERE datname = current_database() AND query ILIKE 'listen%'`;
    assert.equal(count, 1);
  } finally {
    await first.stop();
    await second.stop();
  }
});
