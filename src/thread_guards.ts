/**
 * What a thread does with failures nobody caught. A worker thread survives a stray failure when
 * the work it belonged to is already answered, rather than failing every command it holds; the
 * main thread survives the database driver's, rather than ending the process with every request
 * and socket it serves.
 */
import { describeError, log } from "./log.ts";
import { isTransientDatabaseError } from "./db/transient_retry.ts";

/** Whether `error` was raised inside postgres.js (its connection's own machinery). */
function fromDatabaseDriver(error: unknown): boolean {
  return /\/postgres\/src\/connection\.js/.test(String((error as Error | null)?.stack ?? ""));
}

/**
 * Whether `error` is a socket write failing on a connection the peer closed, raised inside
 * Deno's Node streams with no code of ours on its stack (as an uncaught error, or a rejection):
 * postgres.js drops its socket's listeners when a connection ends, and a write still queued then
 * fails with nobody to hear it. The connection is gone either way.
 */
function fromOrphanedSocketWrite(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== "EPIPE" && code !== "ECONNRESET") return false;
  const frames = String((error as Error).stack ?? "").split("\n").slice(1)
    .filter((line) => line.trim().startsWith("at "));
  return frames.length > 0 && frames.every((line) => line.includes("ext:deno_node/"));
}

/**
 * postgres.js can throw from a timer when PostgreSQL ended a connection under a write in
 * progress (`nextWrite` on a socket already gone). That connection is lost either way and the
 * pool opens another; the thread is kept. Any other uncaught error still ends it.
 */
function guardDriverErrors(name: string): void {
  globalThis.addEventListener("error", (event) => {
    if (!fromDatabaseDriver(event.error) && !fromOrphanedSocketWrite(event.error)) return;
    event.preventDefault();
    log("error", `connection error in the ${name}`, describeError(event.error));
  });
}

/** Installs the guards in a worker thread; `name` names it in the log ("actor", "delivery"). */
export function guardWorkerThread(name: string): void {
  // A rejection nobody awaited (a statement sent ahead in a transaction that already failed,
  // say) is logged, not left to end the thread: the work it belonged to has failed and been
  // answered.
  globalThis.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    log("error", `unhandled rejection in the ${name} worker`, describeError(event.reason));
  });
  guardDriverErrors(`${name} worker`);
}

/**
 * Installs the guards in the main thread. postgres.js looked up the array types on a connection's
 * first query without handling its failure (the vendored copy now handles a lost connection's):
 * PostgreSQL ending that connection then (a restart, `pg_terminate_backend`) rejected a promise
 * nobody held, and ended the process; so did a write left queued on a connection it had dropped
 * (EPIPE). Such rejections — saying a connection was
 * lost, raised by the driver or by Deno's Node streams alone — are logged; any other one, a
 * statement's error nobody awaited included, still ends the process, as a bug should.
 */
export function guardMainThread(): void {
  globalThis.addEventListener("unhandledrejection", (event) => {
    const lost = fromDatabaseDriver(event.reason) && isTransientDatabaseError(event.reason);
    if (!lost && !fromOrphanedSocketWrite(event.reason)) return;
    event.preventDefault();
    log("error", "unhandled rejection of a lost connection", describeError(event.reason));
  });
  guardDriverErrors("main thread");
}
