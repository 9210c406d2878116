/**
 * Cross-origin access for routes that browsers call from other sites (the widget runs on the
 * business's pages, not on Parley's origin). Requests authenticate with a Bearer token, never a
 * cookie, so any origin may call: `Access-Control-Allow-Origin: *` without credentials. A
 * preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered 204 before rate limits
 * and routing; the headers of an actual answer are set once it is made, errors included, so that
 * the page can read a 401 or a 429 and its rate-limit headers.
 */
import type { MiddlewareHandler } from "hono";

/** Options of {@linkcode cors}. */
export interface CorsOptions {
  /** Methods a preflight allows. */
  allowMethods: string[];
  /** Request headers a preflight allows (beyond the CORS-safelisted ones). */
  allowHeaders: string[];
  /** Response headers a page may read (beyond the CORS-safelisted ones). */
  exposeHeaders: string[];
  /** How long a browser may keep a preflight's answer. */
  maxAgeSeconds: number;
}

/** Creates the middleware. */
export function cors(options: CorsOptions): MiddlewareHandler {
  const preflight = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": options.allowMethods.join(", "),
    "Access-Control-Allow-Headers": options.allowHeaders.join(", "),
    "Access-Control-Max-Age": String(options.maxAgeSeconds),
  };
  const exposed = options.exposeHeaders.join(", ");
  return async function corsMiddleware(c, next) {
    if (c.req.method === "OPTIONS" && c.req.header("access-control-request-method")) {
      return c.body(null, 204, preflight);
    }
    await next();
    c.res.headers.set("Access-Control-Allow-Origin", "*");
    c.res.headers.set("Access-Control-Expose-Headers", exposed);
  };
}
