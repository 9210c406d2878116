import assert from "node:assert/strict";
import { spawnServer } from "./support/server.ts";
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
  const first = await spawnServer({ DATA_DIR: dataDir });
  const postmaster = await postmasterPid(dataDir);
  const firstPort = await postmasterPort(dataDir);
  assert.ok(await isAlive(postmaster));
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

  const second = await spawnServer({ DATA_DIR: dataDir });
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
  // A command that reads its Flow from standard input holds its session until the input ends.
  const command = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../src/cli.ts", import.meta.url).pathname,
      "flow:set",
      "--app",
      String(id),
      "--file",
      "/dev/stdin",
    ],
    env: { DATA_DIR: dataDir },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // The command has its session open (it waits on stdin after migrating).
  const postmaster = await postmasterPid(dataDir);
  const port = await postmasterPort(dataDir);
  const password = (await Deno.readTextFile(`${dataDir}/pg_password`)).trim();
  const sql = postgres(`postgres://parley:${password}@127.0.0.1:${port}/parley`, { max: 1 });
  try {
    await waitFor(async () => {
      const [{ n }] = await sql`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'parley-cli'`;
      return n > 0;
    }, "the command's session");
  } finally {
    await sql.end();
  }
  const stopping = server.stop();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  assert.ok(await isAlive(postmaster), "PostgreSQL was stopped under the command");
  const writer = command.stdin.getWriter();
  await writer.write(new TextEncoder().encode(JSON.stringify({
    start: "hi",
    nodes: { hi: { message: { message_type: "text", content: "Hello" } } },
  })));
  await writer.close();
  const out = await command.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(JSON.parse(new TextDecoder().decode(out.stdout)).start, "hi");
  assert.equal((await stopping).code, 0);
});
