/**
 * Liveness and readiness: `/healthz` answers while the process runs, a graceful stop included;
 * `/readyz` only while the database answers and the instance is not stopping (a load balancer
 * stops sending traffic otherwise).
 */
import { Hono } from "hono";
import { pingDatabase, type Sql } from "../db/client.ts";
import { ok } from "./envelope.ts";
import { AppError } from "../domain/app_error.ts";
import { methodNotAllowed } from "./method_not_allowed.ts";
import type { ShuttingDown } from "./middleware/shutting_down.ts";

const READY_TIMEOUT_MS = 2_000;

/** Routes `/healthz` and `/readyz`; `shuttingDown` tells the requests that arrived once a stop began. */
export function healthRoutes(sql: Sql, shuttingDown?: ShuttingDown): Hono {
  const routes = new Hono()
    .get("/healthz", (c) => ok(c, { status: "ok" }))
    .get("/readyz", async (c) => {
      if (shuttingDown?.(c.req.raw)) {
        throw new AppError(503, "Shutting down", { headers: { connection: "close" } });
      }
      try {
        await pingDatabase(sql, READY_TIMEOUT_MS);
      } catch (error) {
        throw new AppError(503, "Database unavailable", { cause: error });
      }
      return ok(c, { status: "ready" });
    });
  methodNotAllowed(routes, ["/healthz", "/readyz"]);
  return routes;
}
