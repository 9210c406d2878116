/**
 * The database driver (postgres.js, patched in vendor/postgres: see its PARLEY.md) when a
 * connection's server backend ends, as in a restart or failover of PostgreSQL: every query
 * settles, and the pool goes on with fresh connections.
 */
import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { connect } from "../src/db/client.ts";

/** `promise`'s outcome — "ok" or the error's code — or "hung" after 3 s. */
function outcome(promise: Promise<unknown>): Promise<string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<string>((resolve) => timer = setTimeout(() => resolve("hung"), 3_000));
  const settled = promise.then(
    () => "ok",
    (error) => String((error as { code?: unknown }).code ?? error),
  );
  return Promise.race([settled, hung]).finally(() => clearTimeout(timer));
}

Deno.test("a reserved connection whose backend ended fails its queries, and the pool goes on", async () => {
  await using db = await createTestDatabase();
  // Over TCP, as an external PostgreSQL is reached (the embedded one is also reached over its Unix
  // socket, where the ended backend's close arrives otherwise).
  const tcp = new URL(db.url);
  tcp.search = "";
  const sql = connect(tcp.toString(), { max: 2 });
  const uncaught: string[] = [];
  const onError = (event: ErrorEvent) => {
    uncaught.push(String(event.error));
    event.preventDefault();
  };
  globalThis.addEventListener("error", onError);
  try {
    const reserved = await sql.reserve();
    const [{ pid }] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    await db.sql`SELECT pg_terminate_backend(${pid})`;
    // The backend gets a signal; on a busy machine it may take a while to exit.
    while ((await db.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length > 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await outcome(reserved`SELECT 1`), "CONNECTION_CLOSED");
    // Unpatched, the next write went to a socket already gone: an uncaught TypeError, and a
    // query that never settled.
    assert.equal(await outcome(reserved`SELECT 2`), "CONNECTION_CLOSED");
    reserved.release();
    // Unpatched, the released connection went back among the open ones, socketless: a query
    // sent to it failed, every time.
    for (let i = 0; i < 3; i++) {
      assert.equal(await outcome(Promise.all([sql`SELECT 1`, sql`SELECT 2`, sql`SELECT 3`])), "ok");
    }
    assert.deepEqual(uncaught, []);
  } finally {
    globalThis.removeEventListener("error", onError);
    await sql.end({ timeout: 1 });
  }
});

Deno.test("a reserve waiting for a connection whose backend ended gets it once reconnected", async () => {
  await using db = await createTestDatabase();
  const tcp = new URL(db.url);
  tcp.search = "";
  const sql = connect(tcp.toString(), { max: 1 });
  try {
    const first = await sql.reserve();
    const [{ pid }] = await first<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    // Queued: the pool's only connection is reserved.
    const waiting = sql.reserve();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await db.sql`SELECT pg_terminate_backend(${pid})`;
    // Unpatched, the reconnect took the queued reserve and dropped it: it never settled
    // (porsager/postgres#1195).
    assert.equal(await outcome(waiting), "ok");
    const second = await waiting;
    // The first handle's connection is the second's now: its late statements fail, and its
    // release leaves the second's reservation alone (unpatched, they ran on the connection, or
    // gave it away while it was still connecting).
    assert.equal(await outcome(first`ROLLBACK`), "CONNECTION_CLOSED");
    first.release();
    assert.equal(await outcome(second`SELECT 1`), "ok");
    second.release();
    assert.equal(await outcome(sql`SELECT 1`), "ok");
  } finally {
    await sql.end({ timeout: 1 });
  }
});
