/**
 * Lets the requests being handled finish before the server shuts down. Deno 2.9's
 * `HttpServer.shutdown()` makes the body of every request in flight unreadable at once
 * (denoland/deno#36809: `BadResource`), so a request whose body was still arriving when the
 * instance was told to stop got a 500. So a stop first drains: requests that arrive meanwhile are
 * refused with `503 Shutting down` (and `Connection: close`, for the client to go elsewhere),
 * and `shutdown()` is called once the handlers of those in flight have answered.
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

/** Wraps `handle` to count the requests it is handling. */
export function drainable(handle: ServeHandler): DrainableHandler {
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
      if (draining) return errorResponse(503, "Shutting down", { connection: "close" });
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
