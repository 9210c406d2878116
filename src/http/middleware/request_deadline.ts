/**
 * A deadline on a request's answer. A database that stops answering without closing its
 * connections (a frozen server, a failover that leaves the old address silent) leaves a query
 * pending until the kernel gives the connection up, a quarter of an hour later: the request
 * waited as long, and the client with it. Past the deadline the request is answered
 * `500 Internal server error` (CONTRACT §2: the cause is logged, never returned) and the work
 * goes on without it; whatever it finally does is what a retry finds.
 */
import type { MiddlewareHandler } from "hono";
import { log } from "../../log.ts";
import { errorResponse } from "../envelope.ts";

/**
 * The default deadline: beyond a body's 10 s to arrive plus the actors' 30 s watchdog, so that a
 * message's request is answered `Failed to send` by it first, and far beyond any request a
 * database that answers keeps waiting.
 */
export const REQUEST_DEADLINE_MS = 45_000;

/** Answers a request still unanswered after `deadlineMs` with 500 and logs it. */
export function requestDeadline(deadlineMs: number = REQUEST_DEADLINE_MS): MiddlewareHandler {
  if (!(deadlineMs > 0)) {
    throw new RangeError(`Cannot create request deadline: deadlineMs must be positive`);
  }
  return async function requestDeadlineMiddleware(c, next) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(resolve, deadlineMs, "late");
    });
    try {
      if (await Promise.race([next(), late]) !== "late") return;
    } finally {
      clearTimeout(timer);
    }
    log("error", "request unanswered at its deadline", {
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      deadline_ms: deadlineMs,
    });
    return errorResponse(500, "Internal server error");
  };
}
