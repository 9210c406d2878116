/**
 * `deno task bench`: starts Parley on a fresh embedded database and a Hono hello-world server,
 * drives both with the same closed-loop load (64 connections), and prints a table of
 * requests/s, p50 and p99 per scenario, with each scenario's ratio to hello.
 *
 * Environment: BENCH_SECONDS (measured seconds per scenario, default 10), BENCH_VISITORS
 * (default 2000), BENCH_APPS (default 20), BENCH_CONNECTIONS (default 64), WORKERS (Parley's
 * actor workers, default 1: group commits form within a worker, and on 2 cores one worker
 * batches best — see docs/architecture.md).
 */
import { freePort } from "../src/db/embedded.ts";
import { type LoadResult, runLoad } from "./load.ts";

const seconds = Number(Deno.env.get("BENCH_SECONDS") ?? 10);
const visitorCount = Number(Deno.env.get("BENCH_VISITORS") ?? 2000);
const appCount = Number(Deno.env.get("BENCH_APPS") ?? 20);
const connections = Number(Deno.env.get("BENCH_CONNECTIONS") ?? 64);
const workers = Deno.env.get("WORKERS") ?? "1";
const root = new URL("../", import.meta.url).pathname;

const dataDir = await Deno.makeTempDir({ prefix: "parley-bench-" });
const children: Deno.ChildProcess[] = [];
try {
  const parleyPort = await freePort();
  children.push(spawn(["run", "-A", `${root}main.ts`], {
    PORT: String(parleyPort),
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    WIDGET_RATE_LIMIT_PER_MINUTE: "100000000",
    WORKERS: workers,
  }));
  const helloPort = await freePort();
  children.push(spawn(["run", "-A", `${root}bench/hello_server.ts`, String(helloPort)], {}));
  const parley = `http://127.0.0.1:${parleyPort}`;
  const hello = `http://127.0.0.1:${helloPort}`;
  await waitFor(`${parley}/healthz`);
  await waitFor(`${hello}/`);

  const tokens = await createVisitors(parley, dataDir);
  const load = { connections, durationMs: seconds * 1000, warmupMs: 2000 };
  const results: [string, LoadResult][] = [];
  console.error("running: GET hello");
  results.push([
    "GET hello (Hono baseline)",
    await runLoad(() => ({ method: "GET", path: "/" }), { ...load, port: helloPort }),
  ]);
  console.error("running: POST /api/v1/widget/messages");
  results.push([
    "POST /api/v1/widget/messages",
    await runLoad((i) => ({
      method: "POST",
      path: "/api/v1/widget/messages",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${tokens[i % tokens.length]}`,
      },
      body: JSON.stringify({ content: `Benchmark message ${i}` }),
    }), { ...load, port: parleyPort }),
  ]);
  printTable(results);
} finally {
  for (const child of children) {
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    await child.status;
  }
  await Deno.remove(dataDir, { recursive: true }).catch(() => {});
}

function spawn(args: string[], env: Record<string, string>): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args,
    env,
    stdin: "null",
    stdout: "null",
    stderr: "inherit",
  }).spawn();
}

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      const res = await fetch(url);
      await res.body?.cancel();
      if (res.ok) return;
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up`);
}

async function createVisitors(parley: string, dataDir: string): Promise<string[]> {
  const apps: string[] = [];
  for (let i = 0; i < appCount; i++) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${root}src/cli.ts`, "app:create", "--name", `Bench ${i}`],
      env: { DATA_DIR: dataDir },
      stdout: "piped",
    }).output();
    apps.push(JSON.parse(new TextDecoder().decode(out.stdout)).public_id);
  }
  const tokens: string[] = [];
  for (let i = 0; i < visitorCount; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, visitorCount - i) }, async (_, j) => {
        const res = await fetch(`${parley}/api/v1/widget/${apps[(i + j) % apps.length]}/visitors`, {
          method: "POST",
        });
        return (await res.json()).data.visitor_token as string;
      }),
    );
    tokens.push(...batch);
  }
  return tokens;
}

function printTable(results: [string, LoadResult][]): void {
  const baseline = results[0][1].rps;
  const rows = results.map(([name, r]) => [
    name,
    r.rps.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    String(r.errors),
    (r.rps / baseline).toFixed(2),
  ]);
  const header = ["scenario", "req/s", "p50 ms", "p99 ms", "errors", "ratio to hello"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const row of rows) console.log(line(row));
  console.log(
    `\n${connections} connections, ${seconds} s measured per scenario, ${visitorCount} visitors in ${appCount} applications, WORKERS=${workers}`,
  );
}
