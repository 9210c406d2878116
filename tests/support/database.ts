/**
 * An isolated database for one test file, cloned from the migrated template that
 * `tests/run.ts` builds, and dropped again when the test file is done with it.
 */
import { connect, type Sql } from "../../src/db/client.ts";

/** Name of the migrated template database built by `tests/run.ts`. */
export const TEMPLATE_DATABASE = "parley_template";

/** A database of one's own for a test file. */
export interface TestDatabase extends AsyncDisposable {
  /** Connection URL of the database. */
  url: string;
  /** A pool connected to it. */
  sql: Sql;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** Clones the template into a fresh database; `empty`: one without Parley's tables. */
export async function createTestDatabase(
  options: { empty?: boolean } = {},
): Promise<TestDatabase> {
  const serverUrl = Deno.env.get("TEST_DATABASE_URL");
  if (!serverUrl) {
    throw new Error("TEST_DATABASE_URL is not set: run the tests with `deno task test`");
  }
  const name = `test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = connect(serverUrl, { max: 1 });
  try {
    const template = options.empty ? "template0" : TEMPLATE_DATABASE;
    await admin`CREATE DATABASE ${admin(name)} TEMPLATE ${admin(template)}`;
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const sql = connect(url.toString(), { max: 5 });
  let dropped: Promise<void> | null = null;
  const drop = () =>
    dropped ??= (async () => {
      await sql.end({ timeout: 1 });
      const again = connect(serverUrl, { max: 1 });
      try {
        await again`DROP DATABASE IF EXISTS ${again(name)} WITH (FORCE)`;
      } finally {
        await again.end();
      }
    })();
  return { url: url.toString(), sql, drop, [Symbol.asyncDispose]: drop };
}
