/**
 * Request ids and the access log: every request gets an id (a sane incoming `X-Request-Id`
 * is kept), echoed in the response, and one JSON log line when it ends. The path is logged
 * without its query string, which may carry a token.
 */
import type { MiddlewareHandler } from "hono";
import { isLogged, log } from "../../log.ts";

/** Variables this middleware sets on the context. */
export interface RequestLogVariables {
  requestId: string;
}

const SANE_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/** Creates the request-id and access-log middleware. */
export function requestLog(): MiddlewareHandler<{ Variables: RequestLogVariables }> {
  return async function requestLogMiddleware(c, next) {
    const started = performance.now();
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && SANE_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set("requestId", requestId);
    await next();
    c.res.headers.set("X-Request-Id", requestId);
    if (!isLogged("info")) return;
    log("info", "request", {
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
      request_id: requestId,
    });
  };
}
