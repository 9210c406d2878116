import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { migrate, readMigrations } from "../src/db/migrate.ts";
import type { Sql } from "../src/db/client.ts";

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

/** What a database's schema is made of, each part in a stable order. */
async function schemaOf(sql: Sql) {
  return {
    columns: await sql`
      SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default,
        is_identity
      FROM information_schema.columns WHERE table_schema = 'public'
      ORDER BY table_name, column_name`,
    indexes: await sql`
      SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname`,
    // Whether a check was validated is left aside: 0024's first version validated its check.
    constraints: await sql`
      SELECT conrelid::regclass::text AS relation, conname,
        regexp_replace(pg_get_constraintdef(oid), ' NOT VALID$', '') AS def
      FROM pg_constraint WHERE connamespace = 'public'::regnamespace
      ORDER BY relation, conname`,
    relations: await sql`
      SELECT relname, relkind, reloptions FROM pg_class
      WHERE relnamespace = 'public'::regnamespace ORDER BY relname`,
    functions: await sql`
      SELECT proname, pg_get_functiondef(oid) AS def FROM pg_proc
      WHERE pronamespace = 'public'::regnamespace ORDER BY proname`,
    triggers: await sql`
      SELECT tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger
      WHERE NOT tgisinternal ORDER BY tgname`,
  };
}

Deno.test("a database migrated by the first version of a migration edited since reaches today's schema", async () => {
  await using today = await createTestDatabase();
  const expected = await schemaOf(today.sql);
  const current = await readMigrations();
  const firstVersions = await readMigrations(
    new URL("./testdata/rewritten_migrations/", import.meta.url),
  );
  assert.ok(firstVersions.length >= 10);
  for (const first of firstVersions) {
    // Migrated by a commit of the time: the migrations before it, then its first version.
    await using db = await createTestDatabase({ empty: true });
    await migrate(db.sql, [...current.filter((m) => m.version < first.version), first]);
    await migrate(db.sql);
    assert.deepEqual(await schemaOf(db.sql), expected, first.version);
  }
});

/** A database migrated by the first version of `version`, with the migrations before it. */
async function migratedByFirstVersion(version: string) {
  const current = await readMigrations();
  const [first] = (await readMigrations(
    new URL("./testdata/rewritten_migrations/", import.meta.url),
  )).filter((m) => m.version === version);
  const db = await createTestDatabase({ empty: true });
  await migrate(db.sql, [...current.filter((m) => m.version < first.version), first]);
  return db;
}

Deno.test("users whose emails the first users migration told apart keep unique keys", async () => {
  await using db = await migratedByFirstVersion("0011_users");
  const [app] = await db.sql`
    INSERT INTO applications (public_id, name) VALUES ('app_x', 'X') RETURNING id`;
  // Composed and decomposed é, the Kelvin sign and K: one key each under NFKC.
  const emails = [
    "\u00e9lodie@example.com",
    "e\u0301lodie@example.com",
    "\u212aelvin@example.com",
    "kelvin@example.com",
    "Ana@Example.com",
  ];
  for (const email of emails) {
    await db.sql`INSERT INTO users (app_id, email, password_hash, role)
      VALUES (${app.id}, ${email}, 'x', 'agent')`;
  }
  await migrate(db.sql);
  const users = await db.sql<{ id: number; email_key: string }[]>`
    SELECT id, email_key FROM users ORDER BY id`;
  assert.deepEqual(users.map((user) => user.email_key), [
    "\u00e9lodie@example.com",
    `\u00e9lodie@example.com ${users[1].id}`,
    "kelvin@example.com",
    `kelvin@example.com ${users[3].id}`,
    "ana@example.com",
  ]);
});

Deno.test("parts sent before the first channel sends migration's edit get their conversation", async () => {
  await using db = await migratedByFirstVersion("0006_channel_delivery_attempts");
  const [app] = await db.sql`
    INSERT INTO applications (public_id, name) VALUES ('app_x', 'X') RETURNING id`;
  const [client] = await db.sql`
    INSERT INTO clients (app_id, name) VALUES (${app.id}, 'Ana') RETURNING id`;
  const [chat] = await db.sql`
    INSERT INTO conversations (app_id, client_id, channel) VALUES (${app.id}, ${client.id}, 'whatsapp')
    RETURNING id`;
  const [message] = await db.sql`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content)
    VALUES (${app.id}, ${chat.id}, 'bot', 'text', 'Hi') RETURNING id`;
  await db.sql`INSERT INTO whatsapp_sent_parts (app_id, wamid, message_id, part)
    VALUES (${app.id}, 'wamid.1', ${message.id}, 0)`;
  await migrate(db.sql);
  const [part] = await db.sql`SELECT conversation_id FROM whatsapp_sent_parts`;
  assert.equal(Number(part.conversation_id), Number(chat.id));
});

Deno.test("a migration is never edited once committed: each file has the sum it was committed with", async () => {
  // An edited migration never reaches a database that applied it (migrations are recorded by
  // name): change a schema with a new migration, or a `*_catch_up` one after it.
  const dir = new URL("../migrations/", import.meta.url);
  const listed = new Map(
    (await Deno.readTextFile(new URL("SHA256SUMS", dir))).trim().split("\n")
      .map((line) => line.split("  ").reverse() as [string, string]),
  );
  const migrations = await readMigrations(dir);
  assert.deepEqual(
    [...listed.keys()].sort(),
    migrations.map((migration) => `${migration.version}.sql`),
    "migrations/SHA256SUMS lists every migration, and only them (none is removed or renamed)",
  );
  for (const migration of migrations) {
    const bytes = await Deno.readFile(new URL(`${migration.version}.sql`, dir));
    const sum = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))
      .map((byte) => byte.toString(16).padStart(2, "0")).join("");
    assert.equal(
      sum,
      listed.get(`${migration.version}.sql`),
      `${migration.version}.sql: a new migration gets its line in migrations/SHA256SUMS; ` +
        "a committed one is never edited",
    );
  }
});
