/**
 * The answer to requests that arrive while the instance stops (see `drain.ts`): `503 Shutting
 * down` with `Connection: close`, for the client to go elsewhere. Routers that put headers on
 * every answer (CORS, rate limits: CONTRACT §2.1, §3) refuse after those middlewares, so that the
 * refusal carries them too; the app refuses every other path before routing. Only the requests
 * that arrived once the stop began are refused: one accepted before, still in a middleware when
 * the stop began, is handled in full.
 */
import type { MiddlewareHandler } from "hono";
import { errorResponse } from "../envelope.ts";

/** Tells whether `request` arrived once the instance began stopping (and is to be refused). */
export type ShuttingDown = (request: Request) => boolean;

/**
 * Answers `503 Shutting down` to the requests `shuttingDown` marks, except for paths under
 * `exceptUnder` (mount points whose routers refuse by themselves).
 */
export function refuseWhileShuttingDown(
  shuttingDown: ShuttingDown | undefined,
  exceptUnder: readonly string[] = [],
): MiddlewareHandler {
  return async function shuttingDownMiddleware(c, next) {
    if (shuttingDown?.(c.req.raw)) {
      const path = c.req.path;
      const handledBelow = exceptUnder.some((mount) =>
        path === mount || path.startsWith(`${mount}/`)
      );
      if (!handledBelow) return errorResponse(503, "Shutting down", { connection: "close" });
    }
    await next();
  };
}
