/**
 * Parley's entry point (`deno task start`): raises the open file limit, reads the configuration,
 * starts an instance and shuts it down gracefully on SIGINT or SIGTERM.
 */
import { loadConfig } from "./src/config.ts";
import { startParley } from "./src/server.ts";
import { describeError, log } from "./src/log.ts";
import { guardMainThread } from "./src/thread_guards.ts";
import { raiseOpenFileLimit } from "./src/open_file_limit.ts";

if (import.meta.main) {
  guardMainThread();
  const openFiles = await raiseOpenFileLimit();
  if (openFiles) log("info", "open file limit", { soft: openFiles.soft, hard: openFiles.hard });
  try {
    const parley = await startParley(loadConfig());
    let signalled = false;
    const onSignal = () => {
      if (signalled) return;
      signalled = true;
      parley.stop().then(() => Deno.exit(0), (error) => {
        log("error", "shutdown failed", describeError(error));
        Deno.exit(1);
      });
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
