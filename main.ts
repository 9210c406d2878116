/**
 * Parley's entry point (`deno task start`): raises the open file limit, reads the configuration,
 * starts an instance and shuts it down gracefully on SIGINT or SIGTERM.
 */
import { loadConfig } from "./src/config.ts";
import { SHUTDOWN_GRACE_MS, startParley } from "./src/server.ts";
import { describeError, log, setLogLevel } from "./src/log.ts";
import { guardMainThread } from "./src/thread_guards.ts";
import { raiseOpenFileLimit } from "./src/open_file_limit.ts";

/** How long a stop may take: the requests' grace period, then the writes and the database. */
const STOP_BOUND_MS = SHUTDOWN_GRACE_MS + 20_000;

/** Ends the process without waiting for the stop. */
function forceExit(why: string): never {
  log("error", "stopping without waiting any longer", { reason: why });
  Deno.exit(1);
}

if (import.meta.main) {
  guardMainThread();
  const openFiles = await raiseOpenFileLimit();
  try {
    const config = loadConfig();
    setLogLevel(config.logLevel); // before the first line, which LOG_LEVEL may silence
    if (openFiles) log("info", "open file limit", { soft: openFiles.soft, hard: openFiles.hard });
    const parley = await startParley(config);
    let signalled = false;
    const onSignal = () => {
      // A second signal, or a stop that outlasts its bound (a database that stopped answering
      // holds the last writes), ends the process at once: an embedded PostgreSQL stops with it.
      if (signalled) return forceExit("a second signal");
      signalled = true;
      const bound = setTimeout(() => forceExit("the stop outlasted its bound"), STOP_BOUND_MS);
      parley.stop().then(() => Deno.exit(0), (error) => {
        log("error", "shutdown failed", describeError(error));
        Deno.exit(1);
      }).finally(() => clearTimeout(bound));
    };
    Deno.addSignalListener("SIGINT", onSignal);
    Deno.addSignalListener("SIGTERM", onSignal);
    // Without its database the instance cannot work: exit non-zero for a supervisor to restart.
    parley.lost.then(() => {
      signalled = true;
      parley.stop().finally(() => Deno.exit(1));
    });
  } catch (error) {
    log("error", "start failed", describeError(error));
    Deno.exit(1);
  }
}
