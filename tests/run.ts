/**
 * `deno task test`: a self-contained test run. Starts an embedded PostgreSQL with fsync off
 * (unless `TEST_DATABASE_URL` names a server), builds a migrated template database, runs
 * `deno test` with the server's URL in the environment so that each test file clones its own
 * database from the template, then prints one `N passed, N failed` line and exits non-zero on
 * any failure. Arguments are passed on to `deno test` (e.g. a file or `--filter`).
 */
import { openEmbeddedPostgres } from "../src/db/embedded.ts";
import { connect } from "../src/db/client.ts";
import { migrate } from "../src/db/migrate.ts";
import { TEMPLATE_DATABASE } from "./support/database.ts";

const ownDir = Deno.env.get("TEST_DATABASE_URL")
  ? null
  : await Deno.makeTempDir({ prefix: "parley-test-" });
const server = ownDir ? await openEmbeddedPostgres({ dataDir: ownDir, durable: false }) : null;
const serverUrl = server?.url ?? Deno.env.get("TEST_DATABASE_URL")!;

let code = 1;
try {
  await buildTemplate(serverUrl);
  code = await runDenoTest(serverUrl, Deno.args);
} finally {
  await server?.stop();
  if (ownDir) await Deno.remove(ownDir, { recursive: true }).catch(() => {});
}
Deno.exit(code);

async function buildTemplate(url: string): Promise<void> {
  const admin = connect(url, { max: 1 });
  try {
    await admin`DROP DATABASE IF EXISTS ${admin(TEMPLATE_DATABASE)} WITH (FORCE)`;
    await admin`CREATE DATABASE ${admin(TEMPLATE_DATABASE)}`;
  } finally {
    await admin.end();
  }
  const template = connect(withDatabase(url, TEMPLATE_DATABASE), { max: 1 });
  try {
    await migrate(template);
  } finally {
    await template.end();
  }
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function runDenoTest(url: string, args: string[]): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--parallel", ...args],
    env: { TEST_DATABASE_URL: url },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let summary: { passed: number; failed: number } | null = null;
  let tail = "";
  const decoder = new TextDecoder();
  for await (const chunk of child.stdout) {
    await Deno.stdout.write(chunk);
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4096);
  }
  const status = await child.status;
  // deno's closing line: "ok | 12 passed (3 steps) | 0 failed (2s)" or "FAILED | 3 passed | 1 failed ..."
  // deno-lint-ignore no-control-regex -- strips the colour codes of deno's own output
  const plain = tail.replace(/\x1b\[[0-9;]*m/g, "");
  const match = /(?:ok|FAILED) \| (\d+) passed[^|]*\| (\d+) failed/.exec(plain);
  if (match) summary = { passed: Number(match[1]), failed: Number(match[2]) };
  const passed = summary?.passed ?? 0;
  const failed = summary?.failed ?? (status.success ? 0 : 1);
  console.log(`${passed} passed, ${failed} failed`);
  return status.success && summary !== null && passed > 0 ? 0 : 1;
}
