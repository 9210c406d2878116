/**
 * Hono answers a known path with an unknown method as 404; the contract wants
 * `405 Method not allowed`. Registered after a router's real routes, this catches the rest and
 * names the methods the path does take in `Allow` (RFC 9110 §15.5.6).
 */
import type { Env, Hono } from "hono";
import { AppError } from "../domain/app_error.ts";

/** Answers 405 for every method not routed on `paths` of `router`, with `Allow`. */
export function methodNotAllowed<E extends Env>(router: Hono<E>, paths: string[]): void {
  for (const path of paths) {
    const methods = new Set(
      router.routes.filter((route) => route.path === path && route.method !== "ALL")
        .map((route) => route.method),
    );
    // Hono answers HEAD with its GET route.
    if (methods.has("GET")) methods.add("HEAD");
    if (methods.size === 0) {
      throw new Error(`Cannot answer 405 on ${path}: no route is registered on it`);
    }
    const allow = [...methods].sort().join(", ");
    router.all(path, () => {
      throw new AppError(405, "Method not allowed", { headers: { Allow: allow } });
    });
  }
}
