/**
 * Runs test files for `tests/run.ts`: each file in a `deno test` process of its own, a few at a
 * time, under a watchdog. One process per file keeps a file that wedges its Deno process (a CI run
 * once saw every Web Worker started after some point never become ready, and one test wait forever)
 * from taking the other files with it, and the watchdog turns such a hang into a named failure
 * instead of a CI run that never ends.
 */

/** How one test file's run ended. */
export interface FileOutcome {
  file: string;
  passed: number;
  failed: number;
  /** Everything the process printed, stdout and stderr in the order they came. */
  output: string;
  /** Why the watchdog ended the process, or null if it ended by itself. */
  killed: string | null;
  /** Whether the process exited successfully. */
  success: boolean;
  durationMs: number;
  /**
   * When this is a second run: why the watchdog killed the first, whose output is kept at the
   * head of `output`.
   */
  killedBefore: string | null;
}

/** Limits of the watchdog. */
export interface Watchdog {
  /** A process that prints nothing for this long is killed. */
  silenceMs: number;
  /** A process still running after this long is killed. */
  totalMs: number;
}

/** Options of {@linkcode runTestFile}. */
export interface RunFileOptions {
  /** Arguments put before the file, after `deno test -A --no-check` (`--filter x`, say). */
  flags: string[];
  env: Record<string, string>;
  watchdog: Watchdog;
}

const DIRECTORIES_SKIPPED = new Set(["node_modules", "vendor", ".parley", ".git"]);

/** Every `*_test.ts` under `root`, sorted, skipping dependencies and generated directories. */
export async function findTestFiles(root: string): Promise<string[]> {
  const found: string[] = [];
  async function walk(dir: string): Promise<void> {
    for await (const entry of Deno.readDir(dir)) {
      const path = dir === "." ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory && !DIRECTORIES_SKIPPED.has(entry.name)) await walk(path);
      else if (entry.isFile && entry.name.endsWith("_test.ts")) found.push(path);
    }
  }
  await walk(root);
  return found.sort();
}

/** `deno test` flags whose value is the next argument when not written `--flag=value`. */
const FLAGS_WITH_VALUE = new Set(["--filter", "--seed", "--reporter", "--junit-path"]);

/**
 * Splits `deno task test` arguments into files (paths that exist; a directory stands for its test
 * files) and the flags passed on to every `deno test` (the value after `--filter` included).
 */
export async function splitArguments(
  args: string[],
): Promise<{ files: string[]; flags: string[] }> {
  const files: string[] = [];
  const flags: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg.startsWith("-")) {
      flags.push(arg);
      if (!arg.includes("=") && FLAGS_WITH_VALUE.has(arg) && i + 1 < args.length) {
        flags.push(args[++i]);
      }
      continue;
    }
    const stat = await Deno.stat(arg).catch(() => null);
    if (stat?.isDirectory) files.push(...await findTestFiles(arg.replace(/\/+$/, "")));
    else files.push(arg);
  }
  return { files, flags };
}

/** Runs one test file in its own `deno test` process and reads its result. */
export async function runTestFile(file: string, options: RunFileOptions): Promise<FileOutcome> {
  const started = Date.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--no-check", ...options.flags, file],
    env: { ...options.env, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const chunks: string[] = [];
  let lastOutput = Date.now();
  async function drain(stream: ReadableStream<Uint8Array>): Promise<void> {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      chunks.push(text);
      lastOutput = Date.now();
    }
  }
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]);
  let killed: string | null = null;
  const watch = setInterval(() => {
    const now = Date.now();
    if (now - lastOutput > options.watchdog.silenceMs) {
      killed = `printed nothing for ${Math.round(options.watchdog.silenceMs / 1000)} s`;
    } else if (now - started > options.watchdog.totalMs) {
      killed = `ran longer than ${Math.round(options.watchdog.totalMs / 1000)} s`;
    }
    if (killed) {
      clearInterval(watch);
      try {
        child.kill("SIGKILL");
      } catch {
        // it ended meanwhile
      }
    }
  }, 1_000);
  const status = await child.status;
  clearInterval(watch);
  await drained;
  const output = chunks.join("");
  const summary = readSummary(output);
  return {
    file,
    passed: summary?.passed ?? 0,
    // A process that failed without a summary (it did not load, or was killed) is one failure.
    failed: summary === null || killed ? Math.max(1, summary?.failed ?? 0) : summary.failed,
    output,
    killed,
    success: status.success && killed === null && summary !== null,
    durationMs: Date.now() - started,
    killedBefore: null,
  };
}

/**
 * Reads deno's closing line: "ok | 12 passed (3 steps) | 0 failed (2s)" or
 * "FAILED | 3 passed | 1 failed (...)".
 */
export function readSummary(output: string): { passed: number; failed: number } | null {
  // deno-lint-ignore no-control-regex -- strips colour codes, should any be printed
  const plain = output.replace(/\x1b\[[0-9;]*m/g, "");
  const matches = [...plain.matchAll(/^(?:ok|FAILED) \| (\d+) passed[^|\n]*\| (\d+) failed/gm)];
  const last = matches.at(-1);
  return last ? { passed: Number(last[1]), failed: Number(last[2]) } : null;
}

/**
 * Runs `files` at most `concurrency` at a time; `onDone` hears of each as it ends. A file the
 * watchdog killed is run once more, and its outcome is that second run's, saying it hung before:
 * the hang seen in CI was Deno's (module loading wedged process-wide), not a test's, and a file
 * that hangs again still fails.
 */
export async function runTestFiles(
  files: string[],
  concurrency: number,
  options: RunFileOptions,
  onDone: (outcome: FileOutcome) => void,
): Promise<FileOutcome[]> {
  const outcomes: FileOutcome[] = [];
  let next = 0;
  async function lane(): Promise<void> {
    while (next < files.length) {
      const file = files[next++];
      let outcome = await runTestFile(file, options);
      if (outcome.killed) {
        const again = await runTestFile(file, options);
        outcome = {
          ...again,
          output: `${outcome.output}\n== ${file}: KILLED: ${outcome.killed}; running it again\n\n` +
            again.output,
          killedBefore: outcome.killed,
        };
      }
      outcomes.push(outcome);
      onDone(outcome);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, lane));
  return outcomes;
}
