/**
 * Parley instances for integration tests: one in this process (`startTestServer`), or a real
 * `deno run main.ts` child process (`spawnServer`) for what only separate processes prove.
 */
import { loadConfig } from "../../src/config.ts";
import { type RunningParley, type StartOptions, startParley } from "../../src/server.ts";

/** An in-process instance on a free port. */
export interface TestServer extends AsyncDisposable {
  parley: RunningParley;
  /** `http://127.0.0.1:PORT` */
  baseUrl: string;
}

/** The secret-box key of test instances (base64 of 32 bytes). */
export const TEST_ENCRYPTION_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(42)));

/** Starts an instance on `databaseUrl` with test-friendly defaults. */
export async function startTestServer(
  databaseUrl: string,
  env: Record<string, string> = {},
  options: StartOptions = {},
): Promise<TestServer> {
  const parley = await startParley(
    loadConfig({
      DATABASE_URL: databaseUrl,
      PORT: "0",
      WORKERS: "2",
      LOG_LEVEL: "silent",
      PARLEY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      ...env,
    }),
    options,
  );
  return {
    parley,
    baseUrl: `http://127.0.0.1:${parley.port}`,
    [Symbol.asyncDispose]: () => parley.stop(),
  };
}

/** A `deno run main.ts` child process. */
export interface SpawnedServer extends AsyncDisposable {
  baseUrl: string;
  process: Deno.ChildProcess;
  /** Every stdout line printed so far (the JSON log). */
  lines: string[];
  /** Everything printed on stderr, once the process has ended. */
  stderr: Promise<string>;
  /** Sends SIGTERM and waits for the exit status. */
  stop(): Promise<Deno.CommandStatus>;
}

/**
 * Spawns `main.ts` and resolves once it logs that it listens; `launcher` runs it (as
 * `prlimit --nofile=…` would: a command that ends by running the rest of its arguments).
 */
export async function spawnServer(
  env: Record<string, string>,
  { launcher = [] }: { launcher?: string[] } = {},
): Promise<SpawnedServer> {
  const deno = [Deno.execPath(), "run", "-A", new URL("../../main.ts", import.meta.url).pathname];
  const [command, ...args] = [...launcher, ...deno];
  const child = new Deno.Command(command, {
    args,
    env: {
      PORT: "0",
      WORKERS: "1",
      LOG_LEVEL: "info",
      ...(env.DATABASE_URL ? { PARLEY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY } : {}),
      ...env,
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(lineSplitter());
  const reader = lines.getReader();
  const stderr = new Response(child.stderr).text();
  let port: number | null = null;
  const printed: string[] = [];
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  try {
    while (port === null) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`Server exited before listening: ${await stderr}`);
      printed.push(value);
      try {
        const line = JSON.parse(value);
        if (line.msg === "listening") port = line.port;
      } catch {
        // not a log line
      }
    }
  } finally {
    clearTimeout(deadline);
  }
  // Keep draining stdout so the child never blocks on a full pipe.
  (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      printed.push(value);
    }
  })().catch(() => {});
  let stopped: Promise<Deno.CommandStatus> | null = null;
  const stop = () =>
    stopped ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // already exited
      }
      const status = await child.status;
      await stderr;
      return status;
    })();
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    process: child,
    lines: printed,
    stderr,
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}

function lineSplitter(): TransformStream<string, string> {
  let buffer = "";
  return new TransformStream({
    transform(chunk, controller) {
      buffer += chunk;
      const parts = buffer.split("\n");
      buffer = parts.pop()!;
      for (const part of parts) controller.enqueue(part);
    },
    flush(controller) {
      if (buffer) controller.enqueue(buffer);
    },
  });
}
