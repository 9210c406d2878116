/**
 * Hono answers a known path with an unknown method as 404; the contract wants
 * `405 Method not allowed`. Registered after a router's real routes, this catches the rest.
 */
import type { Env, Hono } from "hono";
import { AppError } from "../domain/app_error.ts";

/** Answers 405 for every method not routed on `paths` of `router`. */
export function methodNotAllowed<E extends Env>(router: Hono<E>, paths: string[]): void {
  for (const path of paths) {
    router.all(path, () => {
      throw new AppError(405, "Method not allowed");
    });
  }
}
