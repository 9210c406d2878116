import assert from "node:assert/strict";
import { spawnServer, TEST_ENCRYPTION_KEY } from "./support/server.ts";
import { runCliProcess } from "./support/cli.ts";
import postgres from "postgres";
import { waitForPreviousPostmaster } from "../src/db/embedded.ts";

/** A data directory of its own, removed with everything in it at the end of the test. */
async function tempDataDir(prefix: string): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix });
  return { path, [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }) };
}

/** The pid of the postmaster running on `dataDir` (its `postmaster.pid`'s first line). */
async function postmasterPid(dataDir: string): Promise<number> {
  const text = await Deno.readTextFile(`${dataDir}/pg/postmaster.pid`);
  return Number(text.split("\n")[0]);
}

/** The port of the postmaster running on `dataDir` (its `postmaster.pid`'s fourth line). */
async function postmasterPort(dataDir: string): Promise<number> {
  const text = await Deno.readTextFile(`${dataDir}/pg/postmaster.pid`);
  return Number(text.split("\n")[3]);
}

async function waitFor(check: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function status(url: string, init?: RequestInit): Promise<number> {
  const res = await fetch(url, init).catch(() => null);
  await res?.body?.cancel();
  return res?.status ?? 0;
}

Deno.test("an embedded PostgreSQL killed under the server is started again, and nothing committed is lost", async () => {
  await using temp = await tempDataDir("parley-restart-");
  const dataDir = temp.path;
  const server = await spawnServer({ DATA_DIR: dataDir });
  try {
    const created = await runCliProcess(["app:create", "--name", "Restart"], {
      DATA_DIR: dataDir,
    });
    assert.equal(created.code, 0, created.stderr);
    const { public_id: publicId } = JSON.parse(created.stdout);
    const visitor = await fetch(`${server.baseUrl}/api/v1/widget/${publicId}/visitors`, {
      method: "POST",
    }).then((res) => res.json());
    const token = visitor.data.visitor_token;
    const send = (content: string) =>
      fetch(`${server.baseUrl}/api/v1/widget/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ content }),
      }).then(async (res) => ({ status: res.status, json: await res.json() }));
    const before = await send("before the crash");
    assert.equal(before.status, 200);

    const killed = await postmasterPid(dataDir);
    Deno.kill(killed, "SIGKILL");
    // Orphaned backends may answer for a moment after their postmaster died: wait for the
    // supervisor's word that a new one runs, then for the database to answer through it.
    await waitFor(
      () =>
        Promise.resolve(
          server.lines.some((line) => line.includes("embedded PostgreSQL started again")),
        ),
      "the supervisor to start PostgreSQL again",
    );
    await waitFor(
      async () => (await status(`${server.baseUrl}/readyz`)) === 200,
      "readyz once PostgreSQL runs again",
    );
    assert.notEqual(await postmasterPid(dataDir), killed);

    const after = await send("after the crash");
    assert.equal(after.status, 200, JSON.stringify(after.json));
    assert.equal(after.json.data.chat_id, before.json.data.chat_id);
    const history = await fetch(
      `${server.baseUrl}/api/v1/widget/messages?chat_id=${after.json.data.chat_id}`,
      { headers: { authorization: `Bearer ${token}` } },
    ).then((res) => res.json());
    assert.deepEqual(
      history.data.map((message: { content: string }) => message.content),
      ["before the crash", "after the crash"],
    );
  } finally {
    assert.equal((await server.stop()).code, 0);
  }
});

Deno.test("a server whose embedded PostgreSQL cannot be started again exits non-zero", async () => {
  await using temp = await tempDataDir("parley-lost-");
  const dataDir = temp.path;
  const server = await spawnServer({ DATA_DIR: dataDir });
  try {
    const killed = await postmasterPid(dataDir);
    // Without its data directory PostgreSQL cannot start again, however often it is tried.
    await Deno.rename(`${dataDir}/pg`, `${dataDir}/pg-away`);
    Deno.kill(killed, "SIGKILL");
    const exited = await Promise.race([
      server.process.status,
      new Promise<null>((resolve) => setTimeout(() => resolve(null), 30_000)),
    ]);
    assert.ok(exited !== null, "the server did not exit");
    assert.equal(exited.code, 1);
  } finally {
    await server.stop();
  }
});

/** Whether `pid` names a live process (a zombie, exited but not yet reaped, is not). */
async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

Deno.test("a server killed with SIGKILL takes its embedded PostgreSQL with it, and the next start owns a fresh one", async () => {
  await using temp = await tempDataDir("parley-orphan-");
  const dataDir = temp.path;
  const secrets = {
    PARLEY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    SLACK_SIGNING_SECRET: "signing-secret-kept-from-postgres",
  };
  const first = await spawnServer({ DATA_DIR: dataDir, ...secrets });
  const postmaster = await postmasterPid(dataDir);
  const firstPort = await postmasterPort(dataDir);
  assert.ok(await isAlive(postmaster));
  // PostgreSQL gets none of Parley's secrets: its environment is readable by its user and its
  // superuser.
  const environment = await Deno.readTextFile(`/proc/${postmaster}/environ`);
  for (const secret of Object.values(secrets)) assert.ok(!environment.includes(secret));
  assert.match(environment, /(^|\0)PATH=/, "what it needs, it has");
  // A start meanwhile would see this postmaster for what it is, and share it.
  assert.equal(typeof await waitForPreviousPostmaster(`${dataDir}/pg`, 1_000), "number");
  first.process.kill("SIGKILL");
  await first.process.status;
  try {
    await waitFor(async () => !(await isAlive(postmaster)), "the orphaned PostgreSQL to stop");
  } catch (error) {
    Deno.kill(postmaster, "SIGKILL"); // not leave it running after the test
    throw error;
  }
  await waitFor(
    () => Deno.stat(`${dataDir}/pg/postmaster.pid`).then(() => false, () => true),
    "PostgreSQL's shutdown to remove its postmaster.pid",
  );

  const second = await spawnServer({ DATA_DIR: dataDir, ...secrets });
  try {
    const next = await postmasterPid(dataDir);
    assert.notEqual(next, postmaster);
    // On the port the last one had (free again): processes that shared it find it there.
    assert.equal(await postmasterPort(dataDir), firstPort);
    assert.equal(await status(`${second.baseUrl}/readyz`), 200);
    // The server started this PostgreSQL, so a graceful stop stops it too.
    assert.equal((await second.stop()).code, 0);
    await waitFor(async () => !(await isAlive(next)), "the owned PostgreSQL to stop");
  } finally {
    await second.stop();
  }
});

Deno.test("a server sharing another process's embedded PostgreSQL carries on, owning it, after that process stops", async () => {
  await using temp = await tempDataDir("parley-shared-");
  const dataDir = temp.path;
  const first = await spawnServer({ DATA_DIR: dataDir });
  const second = await spawnServer({ DATA_DIR: dataDir });
  try {
    const original = await postmasterPid(dataDir);
    assert.ok(
      second.lines.some((line) => line.includes('"database":"embedded"')),
      "the sharing server names its database embedded",
    );
    const created = await runCliProcess(["app:create", "--name", "Shared"], {
      DATA_DIR: dataDir,
    });
    assert.equal(created.code, 0, created.stderr);
    const { public_id: publicId } = JSON.parse(created.stdout);

    // The first server stops its PostgreSQL with it; the second starts it again on the same
    // port, so its connections find it where they were.
    assert.equal((await first.stop()).code, 0);
    await waitFor(
      () => Promise.resolve(second.lines.some((line) => line.includes("started again"))),
      "the sharing server to start PostgreSQL again",
    );
    await waitFor(
      async () => (await status(`${second.baseUrl}/readyz`)) === 200,
      "readyz on the sharing server",
    );
    const next = await postmasterPid(dataDir);
    assert.notEqual(next, original);
    const visitor = await fetch(`${second.baseUrl}/api/v1/widget/${publicId}/visitors`, {
      method: "POST",
    });
    assert.equal(visitor.status, 200, await visitor.text());

    // It owns that PostgreSQL now: its graceful stop stops it.
    assert.equal((await second.stop()).code, 0);
    await waitFor(async () => !(await isAlive(next)), "the adopted PostgreSQL to stop");
  } finally {
    await first.stop();
    await second.stop();
  }
});

Deno.test("a server started while the shared PostgreSQL is down starts it on the port it had, so its sharer carries on", async () => {
  await using temp = await tempDataDir("parley-restart-owner-");
  const dataDir = temp.path;
  const first = await spawnServer({ DATA_DIR: dataDir });
  const second = await spawnServer({ DATA_DIR: dataDir });
  let third: Awaited<ReturnType<typeof spawnServer>> | null = null;
  try {
    const port = await postmasterPort(dataDir);
    // A restart of the owner: it stops, and a new start comes at once, racing the sharer.
    assert.equal((await first.stop()).code, 0);
    third = await spawnServer({ DATA_DIR: dataDir });
    assert.equal(await postmasterPort(dataDir), port);
    await waitFor(
      async () => (await status(`${second.baseUrl}/readyz`)) === 200,
      "readyz on the sharing server",
    );
    assert.equal(await status(`${third.baseUrl}/readyz`), 200);
    // Whichever started it, the sharer is still running and was never told its database is lost.
    assert.ok(!second.lines.some((line) => line.includes("embedded PostgreSQL lost")));
    const exited = await Promise.race([
      second.process.status.then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), 1_000)),
    ]);
    assert.equal(exited, false, "the sharing server exited");
  } finally {
    await first.stop();
    await third?.stop();
    await second.stop();
  }
});

Deno.test("a server that owns the embedded PostgreSQL lets another process's admin command finish before stopping it", async () => {
  await using temp = await tempDataDir("parley-command-");
  const dataDir = temp.path;
  const server = await spawnServer({ DATA_DIR: dataDir });
  const created = await runCliProcess(["app:create", "--name", "Waits"], { DATA_DIR: dataDir });
  assert.equal(created.code, 0, created.stderr);
  const { id } = JSON.parse(created.stdout);
  const command = await heldCommand(dataDir, id);
  const postmaster = await postmasterPid(dataDir);
  const stopping = server.stop();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  assert.ok(await isAlive(postmaster), "PostgreSQL was stopped under the command");
  await command.finish();
  assert.equal((await stopping).code, 0);
});

/**
 * An admin command (`flow:set` reading its Flow from standard input) that holds its database
 * session until `finish` gives it the input: resolves once the session is open.
 */
async function heldCommand(dataDir: string, appId: number) {
  const command = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../src/cli.ts", import.meta.url).pathname,
      "flow:set",
      "--app",
      String(appId),
      "--file",
      "/dev/stdin",
    ],
    env: { DATA_DIR: dataDir },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // The command has its session open (it waits on stdin after migrating).
  await waitFor(async () => {
    const port = await postmasterPort(dataDir).catch(() => null);
    if (port === null) return false;
    const password = (await Deno.readTextFile(`${dataDir}/pg_password`)).trim();
    const sql = postgres(`postgres://parley:${password}@127.0.0.1:${port}/parley`, { max: 1 });
    try {
      const [{ n }] = await sql`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'parley-cli'`;
      return n > 0;
    } catch {
      return false;
    } finally {
      await sql.end();
    }
  }, "the command's session");
  return {
    async finish() {
      const writer = command.stdin.getWriter();
      await writer.write(new TextEncoder().encode(JSON.stringify({
        start: "hi",
        nodes: { hi: { message: { message_type: "text", content: "Hello" } } },
      })));
      await writer.close();
      const out = await command.output();
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      assert.equal(JSON.parse(new TextDecoder().decode(out.stdout)).start, "hi");
    },
  };
}

Deno.test("a server started while an admin command runs the embedded PostgreSQL waits for it to end, then runs its own", async () => {
  await using temp = await tempDataDir("parley-after-command-");
  const dataDir = temp.path;
  const created = await runCliProcess(["app:create", "--name", "First"], { DATA_DIR: dataDir });
  assert.equal(created.code, 0, created.stderr);
  const command = await heldCommand(dataDir, JSON.parse(created.stdout).id);
  const commands = await postmasterPid(dataDir);
  // Sharing the command's server, the server would lose its database when the command ended.
  let listening = false;
  const starting = spawnServer({ DATA_DIR: dataDir }).then((server) => {
    listening = true;
    return server;
  });
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.equal(listening, false, "the server started on the command's PostgreSQL");
  await command.finish();
  await using server = await starting;
  const own = await postmasterPid(dataDir);
  assert.notEqual(own, commands);
  assert.ok(!(await isAlive(commands)), "the command's PostgreSQL still runs");
  assert.equal(await status(`${server.baseUrl}/readyz`), 200);
  // And a command run now uses the server's.
  const listed = await runCliProcess(["key:list", "--app", "1"], { DATA_DIR: dataDir });
  assert.equal(listed.code, 0, listed.stderr);
  assert.equal(await postmasterPid(dataDir), own);
});
