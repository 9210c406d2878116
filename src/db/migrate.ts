/**
 * Applies the plain SQL files of `migrations/` in name order, each in its own transaction,
 * and records them in `schema_migrations`. A session advisory lock makes N instances that
 * start at once take turns: the first applies, the others find nothing left to do.
 */
import type { Sql } from "./client.ts";

const MIGRATIONS_DIR = new URL("../../migrations/", import.meta.url);
/** Advisory lock key of migrations; application locks use positive application ids. */
const MIGRATION_LOCK = -7_301_002;

/** A migration file. */
export interface Migration {
  version: string;
  sql: string;
}

/** Reads the migrations shipped with Parley, in the order they apply. */
export async function readMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const migrations: Migration[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.isFile || !entry.name.endsWith(".sql")) continue;
    migrations.push({
      version: entry.name.replace(/\.sql$/, ""),
      sql: await Deno.readTextFile(new URL(entry.name, dir)),
    });
  }
  return migrations.sort((a, b) => a.version < b.version ? -1 : 1);
}

/** Applies the migrations not yet recorded; returns the versions it applied. */
export async function migrate(
  sql: Sql,
  migrations?: Migration[],
): Promise<string[]> {
  const pending = migrations ?? await readMigrations();
  const reserved = await sql.reserve();
  const applied: string[] = [];
  try {
    await reserved`SELECT pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await reserved`
        CREATE TABLE IF NOT EXISTS schema_migrations (
          version text PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )`;
      const done = new Set(
        (await reserved<{ version: string }[]>`SELECT version FROM schema_migrations`)
          .map((row) => row.version),
      );
      for (const migration of pending) {
        if (done.has(migration.version)) continue;
        await reserved`BEGIN`;
        try {
          await reserved.unsafe(migration.sql);
          await reserved`INSERT INTO schema_migrations (version) VALUES (${migration.version})`;
          await reserved`COMMIT`;
        } catch (error) {
          await reserved`ROLLBACK`;
          throw new Error(`Migration ${migration.version} failed`, { cause: error });
        }
        applied.push(migration.version);
      }
    } finally {
      await reserved`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    reserved.release();
  }
  return applied;
}
