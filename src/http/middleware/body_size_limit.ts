/**
 * The request body limit (256 KiB): a bigger body is `413 Request body too large`, whether it
 * declares its length or streams. Mounted inside each surface, after its rate limit, so that
 * the refusal carries the rate-limit headers like every other answer.
 */
import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "../../domain/app_error.ts";

/** Largest request body accepted, in bytes. */
export const MAX_BODY_BYTES = 256 * 1024;

/** Creates the body-limit middleware. */
export function bodySizeLimit(): MiddlewareHandler {
  return bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new AppError(413, "Request body too large");
    },
  });
}
