import assert from "node:assert/strict";
import {
  EMBEDDED_MAX_CONNECTIONS,
  initdbFailure,
  postgresEnvironment,
  waitForPreviousPostmaster,
} from "./embedded.ts";
import { WORKER_POOL_SIZE } from "./client.ts";
import { MAX_WORKERS } from "../config.ts";

/** A data directory whose `postmaster.pid` names `pid` with `status` (and port `port`). */
async function pgDataWith(pid: number, status: string, port = 1): Promise<string> {
  const pgData = await Deno.makeTempDir({ prefix: "parley-pgdata-" });
  const lines = [String(pid), pgData, "0", String(port), "/tmp", "127.0.0.1", "0 0", status, ""];
  await Deno.writeTextFile(`${pgData}/postmaster.pid`, lines.join("\n"));
  return pgData;
}

/** A process that looks like a postmaster (argv[0] `postgres`) and exits after `seconds`. */
async function fakePostmaster(seconds: number): Promise<Deno.ChildProcess> {
  const child = new Deno.Command("bash", { args: ["-c", `exec -a postgres sleep ${seconds}`] })
    .spawn();
  // Until bash has exec'd, the process is not named postgres yet.
  while (!(await Deno.readTextFile(`/proc/${child.pid}/cmdline`)).startsWith("postgres\0")) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return child;
}

Deno.test("waitForPreviousPostmaster waits for a stopping postmaster to exit", async () => {
  // Timed from before the spawn: on a busy machine the spawn itself can take a good part of 1 s.
  const started = performance.now();
  const postmaster = await fakePostmaster(1);
  const pgData = await pgDataWith(postmaster.pid, "stopping");
  try {
    assert.equal(await waitForPreviousPostmaster(pgData), null);
    assert.ok(performance.now() - started >= 800, "returned before the postmaster exited");
  } finally {
    await postmaster.status;
    await Deno.remove(pgData, { recursive: true });
  }
});

Deno.test("waitForPreviousPostmaster returns at once for no file, a dead pid or another program", async () => {
  const other = new Deno.Command("sleep", { args: ["5"] }).spawn();
  const dead = new Deno.Command("true").spawn();
  await dead.status;
  const dirs = [
    await Deno.makeTempDir({ prefix: "parley-pgdata-" }),
    await pgDataWith(dead.pid, "stopping"),
    await pgDataWith(other.pid, "stopping"),
  ];
  try {
    for (const pgData of dirs) {
      const started = performance.now();
      assert.equal(await waitForPreviousPostmaster(pgData), null);
      assert.ok(performance.now() - started < 2_000); // not the seconds of a real wait
    }
  } finally {
    other.kill();
    await other.status;
    for (const pgData of dirs) await Deno.remove(pgData, { recursive: true });
  }
});

/**
 * A process named `postgres` that exits after `seconds` (1 at least) and stays a zombie (its
 * parent never waits for it) until its parent is killed, and a data directory whose
 * `postmaster.pid` names it with `status`; resolves once it is a zombie unless `atOnce`. Disposing
 * of it kills the parent and removes the files. The parent is bash until it execs `sleep`: a child
 * that exited before would be reaped by bash (seen on a loaded machine), so it lives a second.
 */
async function zombiePostmaster(
  seconds: number,
  status: string,
  atOnce = false,
): Promise<{ pid: number; pgData: string; parent: Deno.ChildProcess } & AsyncDisposable> {
  const binDir = await Deno.makeTempDir({ prefix: "parley-bin-" });
  await Deno.copyFile("/bin/sleep", `${binDir}/postgres`);
  await Deno.chmod(`${binDir}/postgres`, 0o755);
  const parent = new Deno.Command("bash", {
    args: ["-c", `${binDir}/postgres ${Math.max(seconds, 1)} & echo $!; exec sleep 60`],
    stdout: "piped",
  }).spawn();
  const reader = parent.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const pid = Number(text.trim());
  // Wait until it runs as `postgres` (bash forked it, and has to exec it), and unless `atOnce`
  // until it has exited and is a zombie.
  for (;;) {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    const named = stat.includes("(postgres)");
    if (named && (atOnce || stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z")) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const pgData = await pgDataWith(pid, status);
  return {
    pid,
    pgData,
    parent,
    async [Symbol.asyncDispose]() {
      try {
        parent.kill();
      } catch {
        // exited already
      }
      await parent.stdout.cancel();
      await parent.status;
      await Deno.remove(pgData, { recursive: true });
      await Deno.remove(binDir, { recursive: true });
    },
  };
}

Deno.test("waitForPreviousPostmaster waits for an exited postmaster until it is reaped", async () => {
  await using zombie = await zombiePostmaster(0, "ready");
  const started = performance.now();
  const waited = waitForPreviousPostmaster(zombie.pgData, 60_000, 3_000);
  // Its parent exits: init (or the nearest subreaper) reaps it — where init reaps orphans.
  await new Promise((resolve) => setTimeout(resolve, 300));
  zombie.parent.kill();
  assert.equal(await waited, null);
  const elapsed = performance.now() - started;
  assert.ok(elapsed >= 290, "returned before the postmaster was reaped");
  const reaped = await Deno.readTextFile(`/proc/${zombie.pid}/stat`).catch(() => null) === null;
  const lockKept = await Deno.stat(`${zombie.pgData}/postmaster.pid`).then(() => true, () => false);
  if (reaped && elapsed < 3_000) {
    assert.ok(lockKept, "the lock file of a reaped postmaster is left to PostgreSQL");
  } else {
    // An init that never reaps orphans: the grace ran out and the lock file went.
    assert.ok(elapsed >= 2_990 && !lockKept, `${elapsed} ms, lock file kept: ${lockKept}`);
  }
});

Deno.test("waitForPreviousPostmaster counts a zombie's grace from when it became one", async () => {
  // A postmaster stopping for 1.5 s, then never reaped.
  await using zombie = await zombiePostmaster(1.5, "stopping", true);
  const started = performance.now();
  assert.equal(await waitForPreviousPostmaster(zombie.pgData, 60_000, 1_000), null);
  const elapsed = performance.now() - started;
  assert.ok(elapsed >= 2_400, `the grace began before the postmaster exited (${elapsed} ms)`);
  await assert.rejects(Deno.stat(`${zombie.pgData}/postmaster.pid`), Deno.errors.NotFound);
});

Deno.test("waitForPreviousPostmaster removes the lock file of a postmaster never reaped", async () => {
  await using zombie = await zombiePostmaster(0, "ready");
  const started = performance.now();
  assert.equal(await waitForPreviousPostmaster(zombie.pgData, 60_000, 300), null);
  assert.ok(performance.now() - started >= 290, "returned before the grace");
  await assert.rejects(Deno.stat(`${zombie.pgData}/postmaster.pid`), Deno.errors.NotFound);
});

Deno.test("waitForPreviousPostmaster gives up on a postmaster that neither stops nor gets ready", async () => {
  const postmaster = await fakePostmaster(30);
  const pgData = await pgDataWith(postmaster.pid, "starting");
  try {
    await assert.rejects(
      waitForPreviousPostmaster(pgData, 300),
      /neither stopped nor became ready/,
    );
  } finally {
    postmaster.kill();
    await postmaster.status;
    await Deno.remove(pgData, { recursive: true });
  }
});

Deno.test("initdbFailure points a root start denied by DATA_DIR's parents at nobody", () => {
  const denied = 'initdb: error: could not open file "/x/.pwfile" for reading: Permission denied';
  assert.equal(
    initdbFailure(denied, true),
    `initdb failed: ${denied} (as root, PostgreSQL runs as nobody: DATA_DIR and every directory above it must let nobody through)`,
  );
  assert.equal(initdbFailure(denied, false), `initdb failed: ${denied}`);
  assert.equal(
    initdbFailure("initdb: error: disk full", true),
    "initdb failed: initdb: error: disk full",
  );
});

Deno.test("postgresEnvironment keeps what PostgreSQL needs and none of Parley's settings", () => {
  const needed = {
    PATH: "/usr/bin",
    LANG: "C.UTF-8",
    LC_ALL: "C",
    TZ: "UTC",
    TMPDIR: "/tmp",
    LD_LIBRARY_PATH: "/opt/lib",
  };
  const parleys = {
    PARLEY_ENCRYPTION_KEY: "key",
    SLACK_SIGNING_SECRET: "secret",
    SLACK_CLIENT_SECRET: "secret",
    DATABASE_URL: "postgres://u:p@h/db",
    PGPASSWORD: "p",
    HOME: "/root",
    XPATH: "/x",
  };
  assert.deepEqual(postgresEnvironment({ ...needed, ...parleys }), needed);
});

Deno.test("the embedded server has room for both kinds of worker threads at their most, and more", () => {
  const workers = 2 * MAX_WORKERS * WORKER_POOL_SIZE;
  // The main pool (10), the LISTEN session, the admin CLI's and some room.
  assert.ok(
    EMBEDDED_MAX_CONNECTIONS >= workers + 50,
    `${EMBEDDED_MAX_CONNECTIONS} < ${workers} + 50`,
  );
});
