/** The admin CLI as its own process, for tests of what it really prints and exits with. */

const CLI = new URL("../../src/cli.ts", import.meta.url).pathname;

/** What a CLI run printed (trimmed) and its exit code. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `deno run -A src/cli.ts ...args` with exactly `env`, `stdin` (if any) on its standard input. */
export async function runCliProcess(
  args: string[],
  env: Record<string, string>,
  stdin?: string,
): Promise<CliRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    env,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const out = await child.output();
  const decoder = new TextDecoder();
  return {
    code: out.code,
    stdout: decoder.decode(out.stdout).trim(),
    stderr: decoder.decode(out.stderr).trim(),
  };
}
