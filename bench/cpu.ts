/**
 * CPU time of processes, read from Linux's /proc. The benchmark reports CPU per request beside
 * requests per second: on a shared 2-core machine req/s drifts by ±20 % between identical runs,
 * CPU per request far less, so it is what tells a real change from the machine's mood.
 */

/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime, in ticks. */
  ticks: number;
}

/** Parses a `/proc/.../stat` line: the command name, the parent pid and utime + stime. */
function parseStat(text: string): { name: string; ppid: number; ticks: number } {
  // The command name is in parentheses and may hold spaces: fields start after the last ")".
  const close = text.lastIndexOf(")");
  const fields = text.slice(close + 2).split(" ");
  return {
    name: text.slice(text.indexOf("(") + 1, close),
    ppid: Number(fields[1]),
    ticks: Number(fields[11]) + Number(fields[12]),
  };
}

function readStat(pid: number): ProcStat | null {
  try {
    const { ppid, ticks } = parseStat(Deno.readTextFileSync(`/proc/${pid}/stat`));
    return { pid, ppid, ticks };
  } catch {
    return null; // gone, or not Linux
  }
}

function allStats(): ProcStat[] {
  const stats: ProcStat[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const stat = readStat(Number(entry.name));
    if (stat) stats.push(stat);
  }
  return stats;
}

/** CPU seconds used so far by process `pid` alone (all its threads). */
export function cpuSecondsOf(pid: number): number {
  return (readStat(pid)?.ticks ?? 0) / TICKS_PER_SECOND;
}

/** CPU seconds used so far by the living descendants of `pid` (not `pid` itself). */
export function cpuSecondsOfDescendants(pid: number): number {
  const stats = allStats();
  const children = new Map<number, ProcStat[]>();
  for (const stat of stats) {
    const list = children.get(stat.ppid) ?? [];
    list.push(stat);
    children.set(stat.ppid, list);
  }
  let ticks = 0;
  const stack = [...(children.get(pid) ?? [])];
  while (stack.length > 0) {
    const stat = stack.pop()!;
    ticks += stat.ticks;
    stack.push(...(children.get(stat.pid) ?? []));
  }
  return ticks / TICKS_PER_SECOND;
}

/**
 * CPU seconds used so far by the threads of process `pid`, summed by thread name (`deno` is the
 * main thread, `worker-N` the Web Workers in the order they started, `V8 DefaultWorke` V8's
 * helper threads: garbage collection and compilation).
 */
export function cpuSecondsByThread(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(`/proc/${pid}/task`)];
  } catch {
    return byName; // gone, or not Linux
  }
  for (const entry of entries) {
    let text: string;
    try {
      text = Deno.readTextFileSync(`/proc/${pid}/task/${entry.name}/stat`);
    } catch {
      continue; // the thread ended meanwhile
    }
    const { name, ticks } = parseStat(text);
    byName.set(name, (byName.get(name) ?? 0) + ticks / TICKS_PER_SECOND);
  }
  return byName;
}

/**
 * CPU seconds the whole machine has spent busy so far, all cores together (user, nice, system,
 * irq, softirq and steal time of /proc/stat): against the benchmark's own processes it shows how
 * much of the machine others took meanwhile, which decides the tail latencies on a shared one.
 */
export function machineBusySeconds(): number {
  try {
    const [cpu] = Deno.readTextFileSync("/proc/stat").split("\n");
    const [, user, nice, system, , , irq, softirq, steal] = cpu.trim().split(/\s+/).map(Number);
    return (user + nice + system + irq + softirq + (steal || 0)) / TICKS_PER_SECOND;
  } catch {
    return 0; // not Linux
  }
}

/**
 * Waits until `cpuSeconds` (a process's CPU so far, e.g. the server's and its PostgreSQL's) grows
 * by less than `maxCores` of a core over a whole `windowMs`, or `timeoutMs` has passed: a scenario
 * then starts on a settled service, not charged with the previous one's background work (a
 * channel's backlog, the mirror's sends, autovacuum). Resolves with the milliseconds waited and
 * whether the service did settle.
 */
export async function waitUntilIdle(
  cpuSeconds: () => number,
  { windowMs = 500, maxCores = 0.1, timeoutMs = 20_000 } = {},
): Promise<{ waitedMs: number; settled: boolean }> {
  const started = performance.now();
  let last = cpuSeconds();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const now = cpuSeconds();
    const waitedMs = performance.now() - started;
    if (now - last <= maxCores * windowMs / 1000) return { waitedMs, settled: true };
    if (waitedMs >= timeoutMs) return { waitedMs, settled: false };
    last = now;
  }
}
