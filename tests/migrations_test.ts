import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { migrate, readMigrations } from "../src/db/migrate.ts";

Deno.test("migrate applies nothing twice, even when instances start at once", async () => {
  await using db = await createTestDatabase();
  const results = await Promise.all([migrate(db.sql), migrate(db.sql), migrate(db.sql)]);
  assert.deepEqual(results, [[], [], []]);
  const rows = await db.sql<{ version: string }[]>`SELECT version FROM schema_migrations`;
  const expected = (await readMigrations()).map((m) => m.version);
  assert.deepEqual(rows.map((r) => r.version).sort(), expected);
});

Deno.test("migrate applies pending migrations in order and records them", async () => {
  await using db = await createTestDatabase();
  const applied = await migrate(
    db.sql,
    [
      { version: "9001_b", sql: "CREATE TABLE t_b (id int REFERENCES t_a (id))" },
      { version: "9000_a", sql: "CREATE TABLE t_a (id int PRIMARY KEY)" },
    ].sort((a, b) => a.version < b.version ? -1 : 1),
  );
  assert.deepEqual(applied, ["9000_a", "9001_b"]);
});

Deno.test("migrate rolls back a failing migration and records nothing for it", async () => {
  await using db = await createTestDatabase();
  await assert.rejects(
    migrate(db.sql, [{ version: "9002_bad", sql: "CREATE TABLE t_c (id int); SELECT 1/0" }]),
    /Migration 9002_bad failed/,
  );
  const [row] = await db.sql`SELECT to_regclass('t_c') AS t,
    (SELECT count(*)::int FROM schema_migrations WHERE version = '9002_bad') AS n`;
  assert.equal(row.t, null);
  assert.equal(row.n, 0);
});

Deno.test("timestamps reach the application with their microseconds", async () => {
  await using db = await createTestDatabase();
  const [row] = await db.sql`SELECT '2026-11-22 01:27:40.123456+00'::timestamptz AS ts`;
  assert.equal(row.ts, "2026-11-22T01:27:40.123456Z");
});
