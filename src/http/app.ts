/**
 * The HTTP front: composes the routers (each applies its own rate limit, then the body size
 * limit), request ids and the access log, and the one place where errors become the contract's envelope. It builds a plain
 * `Request → Response` handler that serves and tests alike.
 */
import { Hono } from "hono";
import type { Sql } from "../db/client.ts";
import { AppError } from "../domain/app_error.ts";
import { describeError, log } from "../log.ts";
import { errorResponse } from "./envelope.ts";
import { healthRoutes } from "./health.ts";
import { requestLog, type RequestLogVariables } from "./middleware/request_log.ts";
import { headLength } from "./middleware/head_length.ts";
import { refuseWhileShuttingDown } from "./middleware/shutting_down.ts";
import { type WidgetDeps, widgetRoutes } from "./widget.ts";
import { type OpenApiDeps, openApiRoutes } from "./openapi/router.ts";
import { whatsappRoutes, type WhatsAppRoutesDeps } from "./whatsapp.ts";
import { slackRoutes, type SlackRoutesDeps } from "./slack.ts";

/** What the HTTP front needs from the rest of Parley. */
export interface HttpDeps extends WidgetDeps, OpenApiDeps, WhatsAppRoutesDeps, SlackRoutesDeps {
  sql: Sql;
}

/** Where the routers that refuse by themselves while the instance stops are mounted. */
const WIDGET_MOUNT = "/api/v1/widget";
const OPEN_API_MOUNT = "/openapi/v1";

/** Builds the HTTP application. */
export function createHttpApp(deps: HttpDeps): Hono<{ Variables: RequestLogVariables }> {
  const app = new Hono<{ Variables: RequestLogVariables }>();
  app.use(requestLog());
  app.use(headLength());
  // Health first: liveness holds while the process runs, stopping included (CONTRACT §1).
  app.route("/", healthRoutes(deps.sql, deps.shuttingDown));
  app.use(refuseWhileShuttingDown(deps.shuttingDown, [WIDGET_MOUNT, OPEN_API_MOUNT]));
  app.route(WIDGET_MOUNT, widgetRoutes(deps));
  app.route(OPEN_API_MOUNT, openApiRoutes(deps));
  app.route("/api/v1/whatsapp", whatsappRoutes(deps));
  app.route("/api/v1/slack", slackRoutes(deps));
  app.notFound(() => errorResponse(404, "Not found"));
  app.onError((error, c) => {
    if (error instanceof AppError) {
      if (error.status >= 500) {
        log("error", "request failed", { request_id: c.get("requestId"), ...describeError(error) });
      }
      return errorResponse(error.status, error.message, error.headers);
    }
    log("error", "unexpected error", { request_id: c.get("requestId"), ...describeError(error) });
    return errorResponse(500, "Internal server error");
  });
  return app;
}
