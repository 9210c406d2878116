/**
 * Liveness and readiness: `/healthz` answers while the process runs; `/readyz` only while the
 * database answers (a load balancer stops sending traffic otherwise).
 */
import { Hono } from "hono";
import { pingDatabase, type Sql } from "../db/client.ts";
import { ok } from "./envelope.ts";
import { AppError } from "../domain/app_error.ts";
import { methodNotAllowed } from "./method_not_allowed.ts";

const READY_TIMEOUT_MS = 2_000;

/** Routes `/healthz` and `/readyz`. */
export function healthRoutes(sql: Sql): Hono {
  const routes = new Hono()
    .get("/healthz", (c) => ok(c, { status: "ok" }))
    .get("/readyz", async (c) => {
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
