/**
 * The response envelope of every API answer (SPEC §2.1): `{"code":0,"data":...}` on success,
 * `{"code":<status>,"message":...}` on error, as `application/json; charset=utf-8`.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

const JSON_TYPE = { "content-type": "application/json; charset=utf-8" };

/** Answers `data` in the success envelope. */
export function ok(c: Context, data: unknown, status: ContentfulStatusCode = 200): Response {
  return c.body(JSON.stringify({ code: 0, data }), status, JSON_TYPE);
}

/** Answers `dataJson`, already JSON text, in the success envelope (no re-serializing). */
export function okRaw(c: Context, dataJson: string): Response {
  return c.body(`{"code":0,"data":${dataJson}}`, 200, JSON_TYPE);
}

/** The error envelope as a standalone Response. */
export function errorResponse(
  status: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify({ code: status, message }), {
    status,
    headers: { ...JSON_TYPE, ...headers },
  });
}
