/**
 * The answer to requests that arrive while the instance stops (see `drain.ts`): `503 Shutting
 * down` with `Connection: close`, for the client to go elsewhere. Routers that put headers on
 * every answer (CORS, rate limits: CONTRACT §2.1, §3) refuse after those middlewares, so that the
 * refusal carries them too; the app refuses every other path before routing.
 */
import type { MiddlewareHandler } from "hono";
import { errorResponse } from "../envelope.ts";

/** Tells whether the instance is stopping. */
export type ShuttingDown = () => boolean;

/**
 * Answers `503 Shutting down` while `shuttingDown()`, except for paths under `exceptUnder`
 * (mount points whose routers refuse by themselves).
 */
export function refuseWhileShuttingDown(
  shuttingDown: ShuttingDown | undefined,
  exceptUnder: readonly string[] = [],
): MiddlewareHandler {
  return async function shuttingDownMiddleware(c, next) {
    if (shuttingDown?.()) {
      const path = c.req.path;
      const handledBelow = exceptUnder.some((mount) =>
        path === mount || path.startsWith(`${mount}/`)
      );
      if (!handledBelow) return errorResponse(503, "Shutting down", { connection: "close" });
    }
    await next();
  };
}
