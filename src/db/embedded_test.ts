import assert from "node:assert/strict";
import { initdbFailure, waitForPreviousPostmaster } from "./embedded.ts";

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
