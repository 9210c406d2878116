/**
 * Lets the requests being handled finish before the server shuts down. Deno 2.9's
 * `HttpServer.shutdown()` makes the body of every request in flight unreadable at once
 * (denoland/deno#36809: `BadResource`), so a request whose body was still arriving when the
 * instance was told to stop got a 500. So a stop first drains: requests that arrive meanwhile are
 * refused — by `refuse`, uncounted, or else with `503 Shutting down` and `Connection: close`, for
 * the client to go elsewhere — and `shutdown()` is called once the handlers of those in flight
 * have answered.
 */
import { errorResponse } from "./envelope.ts";

/** A `Deno.serve` handler. */
export type ServeHandler = (
  request: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
) => Response | Promise<Response>;

/** A handler that can be drained. */
export interface DrainableHandler {
  handler: ServeHandler;
  /**
   * Refuses new requests from now on and resolves once no handler is running: true, or false
   * when `timeoutMs` passed first.
   */
  drain(timeoutMs: number): Promise<boolean>;
}

/**
 * Wraps `handle` to count the requests it is handling. `refuse` answers the requests that arrive
 * once draining began (the app itself, which then refuses them with its headers: see
 * `middleware/shutting_down.ts`); it must not read their bodies.
 */
export function drainable(
  handle: ServeHandler,
  refuse: ServeHandler = () => errorResponse(503, "Shutting down", { connection: "close" }),
): DrainableHandler {
  let running = 0;
  let draining = false;
  let idle: (() => void) | null = null;

  async function counted(
    request: Request,
    info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  ): Promise<Response> {
    running++;
    try {
      return await handle(request, info);
    } finally {
      running--;
      if (running === 0) idle?.();
    }
  }

  return {
    handler(request, info) {
      if (draining) return refuse(request, info);
      return counted(request, info);
    },
    drain(timeoutMs) {
      draining = true;
      if (running === 0) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          idle = null;
          resolve(false);
        }, timeoutMs);
        idle = () => {
          clearTimeout(timer);
          idle = null;
          resolve(true);
        };
      });
    },
  };
}
