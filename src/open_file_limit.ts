/**
 * The process's limit on open files. Every connection holds one, and the soft limit is often 1,024
 * while the hard limit allows far more: an instance would refuse connections (see
 * http/kept_server.ts) long before its memory or CPU ran out. As Go's runtime does, the soft limit
 * is raised to the hard one at start — with util-linux's `prlimit`, since Deno has no setrlimit.
 */

/** The soft and hard limits on open files, as the kernel says. */
export interface OpenFileLimit {
  soft: number;
  hard: number;
}

/** Reads this process's limits from `/proc/self/limits`; null where there is none. */
export async function readOpenFileLimit(): Promise<OpenFileLimit | null> {
  let text: string;
  try {
    text = await Deno.readTextFile("/proc/self/limits");
  } catch {
    return null;
  }
  const match = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
  if (!match) return null;
  const number = (value: string) => value === "unlimited" ? Infinity : Number(value);
  return { soft: number(match[1]), hard: number(match[2]) };
}

/**
 * Raises the soft limit to the hard one when it is lower; resolves to the limits in force after
 * (null where they cannot be read). A failure (no `prlimit`) leaves them as they were.
 */
export async function raiseOpenFileLimit(): Promise<OpenFileLimit | null> {
  const limit = await readOpenFileLimit();
  if (!limit || limit.soft >= limit.hard) return limit;
  const hard = Number.isFinite(limit.hard) ? String(limit.hard) : "unlimited";
  try {
    await new Deno.Command("prlimit", {
      args: [`--pid=${Deno.pid}`, `--nofile=${hard}:${hard}`],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
  } catch {
    // No prlimit here: the limit stays.
  }
  return await readOpenFileLimit();
}
