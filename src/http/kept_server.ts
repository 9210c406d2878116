/**
 * `Deno.serve`, kept serving. Deno's accept loop ends for good the first time accepting fails —
 * with EMFILE once the process has no file descriptor left, which a client that opens connections
 * and never uses them can bring about (Deno has no header timeout) — and the rejection it leaves
 * ended the process. Here the failure is logged and the server listens again on the same port,
 * after 100 ms and then up to 5 s between tries, until it succeeds, is shut down, or a minute has
 * passed (another process took the port: the instance then gives up, for its supervisor to
 * restart it); connections already open go on being served meanwhile. A listener that fails again
 * soon after it came back (the descriptors are still taken: its own was the only one freed) goes
 * on with the longer pauses rather than failing ten times a second.
 */
import type { ServeHandler } from "./drain.ts";
import { createThrottledLog, describeError, log } from "../log.ts";

/** A server kept listening. */
export interface KeptServer {
  /** The port it listens on (the one picked, when asked for port 0). */
  readonly port: number;
  /** Stops listening for good and resolves once the connections are done (Deno's shutdown). */
  shutdown(): Promise<void>;
}

/** What {@linkcode serveKept} is given. */
export interface KeptServerOptions {
  /** The port to listen on (0: any free one). */
  port: number;
  /** The address to listen on. */
  hostname: string;
  /** Answers each request. */
  handler: ServeHandler;
  /**
   * Pauses between tries to listen again, in milliseconds; the last repeats.
   * @default [100, 250, 500, 1_000, 2_000, 5_000]
   */
  retryDelaysMs?: readonly number[];
  /**
   * How long it tries to listen again (another process may have taken the port) before it gives
   * up and calls `onGiveUp`. @default 60_000
   */
  giveUpAfterMs?: number;
  /**
   * How long a listener back must last for its next failure to start again from the first pause.
   * @default 10_000
   */
  steadyAfterMs?: number;
  /** Called once, with the last error, when it gives up: the instance serves nothing. @default none */
  onGiveUp?: (error: Error) => void;
  /** Starts a server (tests pass one whose listener fails). @default Deno.serve */
  serve?: (
    options: Deno.ServeTcpOptions,
    handler: ServeHandler,
  ) => Pick<Deno.HttpServer<Deno.NetAddr>, "finished" | "shutdown">;
}

/** Starts serving; resolves once the first listener is up (a failure to listen then rejects). */
export async function serveKept(options: KeptServerOptions): Promise<KeptServer> {
  const { hostname, handler, retryDelaysMs = [100, 250, 500, 1_000, 2_000, 5_000] } = options;
  const { giveUpAfterMs = 60_000, steadyAfterMs = 10_000 } = options;
  const { onGiveUp = () => {}, serve = Deno.serve } = options;
  const notBack = createThrottledLog("warn", "HTTP listener not back yet", 10_000);
  let failedAt = 0;
  let backAt = -Infinity;
  let lastAttempt = 0;
  let stopping = false;
  let retry: ReturnType<typeof setTimeout> | undefined;
  const first = Promise.withResolvers<Deno.NetAddr>();
  let current = serve({ port: options.port, hostname, onListen: first.resolve }, handler);
  const { port } = await first.promise;

  function watch(server: Pick<Deno.HttpServer<Deno.NetAddr>, "finished">): void {
    server.finished.catch((error) => {
      if (stopping) return;
      log("error", "HTTP listener failed; listening again", { port, ...describeError(error) });
      failedAt = performance.now();
      listenAgain(failedAt - backAt < steadyAfterMs ? lastAttempt + 1 : 0);
    });
  }

  function listenAgain(attempt: number): void {
    lastAttempt = attempt;
    const delay = retryDelaysMs[Math.min(attempt, retryDelaysMs.length - 1)];
    retry = setTimeout(() => {
      retry = undefined;
      if (stopping) return;
      try {
        current = serve({ port, hostname, onListen: () => {} }, handler);
      } catch (error) {
        if (performance.now() - failedAt >= giveUpAfterMs) {
          log("error", "HTTP listener could not listen again; giving up", describeError(error));
          onGiveUp(error instanceof Error ? error : new Error(String(error)));
          return;
        }
        notBack(describeError(error));
        listenAgain(attempt + 1);
        return;
      }
      backAt = performance.now();
      log("info", "HTTP listener back", { port });
      watch(current);
    }, delay);
  }

  watch(current);
  return {
    port,
    async shutdown() {
      stopping = true;
      clearTimeout(retry);
      try {
        await current.shutdown();
      } catch (error) {
        // A listener that had failed (its retry cancelled just now) has nothing more to stop.
        log("warn", "HTTP listener shutdown failed", describeError(error));
      }
    },
  };
}
