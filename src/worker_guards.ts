/**
 * What a worker thread does with failures nobody caught, so that one stray failure does not end
 * a thread (and fail every command it holds) when the work it belonged to is already answered.
 */
import { describeError, log } from "./log.ts";

/** Installs the guards in the calling thread; `name` names it in the log ("actor", "delivery"). */
export function guardWorkerThread(name: string): void {
  // A rejection nobody awaited (a statement sent ahead in a transaction that already failed,
  // say) is logged, not left to end the thread: the work it belonged to has failed and been
  // answered.
  globalThis.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    log("error", `unhandled rejection in the ${name} worker`, describeError(event.reason));
  });
  // postgres.js can throw from a timer when PostgreSQL ended a connection under a write in
  // progress (`nextWrite` on a socket already gone). That connection is lost either way and the
  // pool opens another; the thread, with every other batch it is committing, is kept. Any other
  // uncaught error still ends the thread, which its pool replaces.
  globalThis.addEventListener("error", (event) => {
    if (!/\/postgres\/src\/connection\.js/.test(String(event.error?.stack ?? ""))) return;
    event.preventDefault();
    log("error", `database driver error in the ${name} worker`, describeError(event.error));
  });
}
