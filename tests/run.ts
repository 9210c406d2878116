/**
 * `deno task test`: a self-contained test run. Starts an embedded PostgreSQL with fsync off
 * (unless `TEST_DATABASE_URL` names a server), builds a migrated template database, runs
 * every test file with the server's URL in the environment so that each clones its own database
 * from the template, then prints one `N passed, N failed` line and exits non-zero on any failure.
 * Arguments name the files or directories to run (all test files when none) and flags passed on
 * to `deno test` (e.g. `--filter`).
 */
import { openEmbeddedPostgres } from "../src/db/embedded.ts";
import { connect } from "../src/db/client.ts";
import { migrate } from "../src/db/migrate.ts";
import { TEMPLATE_DATABASE } from "./support/database.ts";
import { findTestFiles, runTestFiles, splitArguments } from "./support/file_runner.ts";

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

/**
 * Type-checks every file once, then runs each test file in a process of its own, a few at a time
 * (see `support/file_runner.ts`), printing each file's output whole as it ends, and a closing
 * `N passed, N failed` line. Integration tests (`tests/`) go first: they take longest.
 */
async function runDenoTest(url: string, args: string[]): Promise<number> {
  const split = await splitArguments(args);
  const files = split.files.length > 0 ? split.files : await findTestFiles(".");
  files.sort((a, b) => Number(!a.startsWith("tests/")) - Number(!b.startsWith("tests/")));
  const checked = await new Deno.Command(Deno.execPath(), { args: ["check", ...files] }).output();
  if (!checked.success) {
    await Deno.stderr.write(checked.stderr);
    console.log("0 passed, 1 failed");
    return 1;
  }
  const concurrency = Math.max(2, navigator.hardwareConcurrency);
  const encoder = new TextEncoder();
  const outcomes = await runTestFiles(files, concurrency, {
    flags: split.flags,
    env: { TEST_DATABASE_URL: url },
    watchdog: { silenceMs: 180_000, totalMs: 1_200_000 },
  }, (outcome) => {
    const seconds = (outcome.durationMs / 1000).toFixed(1);
    const verdict = outcome.killed
      ? `KILLED: ${outcome.killed}`
      : outcome.success
      ? "ok"
      : "FAILED";
    writeAll(
      encoder.encode(`${outcome.output}\n== ${outcome.file}: ${verdict} (${seconds} s)\n\n`),
    );
  });
  for (const outcome of outcomes.filter((outcome) => outcome.killedBefore)) {
    console.log(`hung once: ${outcome.file} (killed: ${outcome.killedBefore}), then run again`);
  }
  const failedFiles = outcomes.filter((outcome) => !outcome.success);
  for (const outcome of failedFiles) {
    console.log(`failed: ${outcome.file}${outcome.killed ? ` (killed: ${outcome.killed})` : ""}`);
  }
  const passed = outcomes.reduce((sum, outcome) => sum + outcome.passed, 0);
  const failed = outcomes.reduce((sum, outcome) => sum + outcome.failed, 0);
  console.log(`${passed} passed, ${failed} failed`);
  return failedFiles.length === 0 && failed === 0 && passed > 0 ? 0 : 1;
}

/** Writes every byte of `bytes` to stdout (one write may take only part of them). */
function writeAll(bytes: Uint8Array): void {
  for (let written = 0; written < bytes.length;) {
    written += Deno.stdout.writeSync(bytes.subarray(written));
  }
}
