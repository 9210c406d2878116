import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { spawnServer } from "./support/server.ts";
import { eventually } from "./support/eventually.ts";

/** The soft and hard open file limits of process `pid`. */
async function limitsOf(pid: number): Promise<[string, string]> {
  const text = await Deno.readTextFile(`/proc/${pid}/limits`);
  const [, soft, hard] = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text)!;
  return [soft, hard];
}

Deno.test("an instance raises its soft open file limit to the hard one", async () => {
  await using db = await createTestDatabase();
  await using server = await spawnServer({ DATABASE_URL: db.url }, {
    launcher: ["prlimit", "--nofile=300:4096"],
  });
  assert.deepEqual(await limitsOf(server.process.pid), ["4096", "4096"]);
  const logged = server.lines.map((line) => JSON.parse(line)).find((l) =>
    l.msg === "open file limit"
  );
  assert.deepEqual({ soft: logged.soft, hard: logged.hard }, { soft: 4096, hard: 4096 });
});

Deno.test("an instance whose file descriptors ran out serves again once they are back", async () => {
  await using db = await createTestDatabase();
  await using server = await spawnServer({ DATABASE_URL: db.url }, {
    launcher: ["prlimit", "--nofile=160:160"],
  });
  const { port } = new URL(server.baseUrl);
  // Connections that never send a byte: Deno keeps them, each one a descriptor, until none is left.
  // The kernel queues connections the instance has not accepted yet, so a connect that succeeds
  // says nothing: the instance's log tells when its listener failed and listened again (the
  // failure itself is an error, on stderr). Slow machines accept late, hence the pauses once the
  // limit is near, and a deadline rather than a fixed count.
  const logged = (msg: string) => server.lines.some((line) => JSON.parse(line).msg === msg);
  const idle: Deno.Conn[] = [];
  const deadline = Date.now() + 30_000;
  while (!logged("HTTP listener back") && Date.now() < deadline && idle.length < 2_000) {
    try {
      idle.push(await Deno.connect({ hostname: "127.0.0.1", port: Number(port) }));
    } catch {
      // Refused: the listener is gone for now.
    }
    if (idle.length >= 120) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(logged("HTTP listener back"), "the listener failed for want of descriptors");
  for (const conn of idle) conn.close();
  const health = await eventually(
    () => fetch(`${server.baseUrl}/healthz`).then((r) => r.text().then(() => r.status), () => 0),
    (status) => status === 200,
    "the instance answers again",
    15_000,
  );
  assert.equal(health, 200);
  const status = await server.stop();
  assert.equal(status.code, 0, "still running, it stopped cleanly");
  assert.match(
    await server.stderr,
    /"msg":"HTTP listener failed; listening again".*Too many open files/,
  );
});

Deno.test("LOG_LEVEL above info silences the open file limit line too, the first a start writes", async () => {
  await using db = await createTestDatabase();
  await using server = await spawnServer({ DATABASE_URL: db.url, LOG_LEVEL: "warn" }, {
    launcher: ["prlimit", "--nofile=300:4096"],
  });
  const lines = server.lines.map((line) => JSON.parse(line));
  assert.deepEqual(lines.filter((l) => l.level === "info").map((l) => l.msg), ["listening"]);
});
