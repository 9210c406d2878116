/**
 * Request body parsing in the contract's terms: a body that does not parse for its
 * Content-Type is `400 Invalid JSON body`; a Content-Type the route does not take is
 * `415 Unsupported content type`.
 */
import type { Context } from "hono";
import { AppError } from "../domain/app_error.ts";

/** Body encodings a route may accept. */
export type BodyEncoding = "json" | "form";

/** Which encoding the request declares, or null when it is none the route accepts. */
function encodingOf(c: Context, accepted: BodyEncoding[]): BodyEncoding | null {
  const type = (c.req.header("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (accepted.includes("json") && (type === "application/json" || type.endsWith("+json"))) {
    return "json";
  }
  if (accepted.includes("form") && type === "application/x-www-form-urlencoded") return "form";
  return null;
}

/**
 * Reads the body as a plain object. `optional` lets an empty body (no content at all) stand
 * for `{}`. Form bodies give string values.
 */
export async function readBody(
  c: Context,
  accepted: BodyEncoding[],
  options: { optional?: boolean } = {},
): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (options.optional && text.trim() === "") return {};
  const encoding = encodingOf(c, accepted);
  if (encoding === null) throw new AppError(415, "Unsupported content type");
  if (encoding === "form") return Object.fromEntries(new URLSearchParams(text));
  const value = parseJson(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new AppError(400, "Invalid JSON body");
  }
  return value as Record<string, unknown>;
}

/** Reads a JSON body as whatever value it holds, for routes that judge its shape themselves. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (encodingOf(c, ["json"]) === null) throw new AppError(415, "Unsupported content type");
  return parseJson(text);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new AppError(400, "Invalid JSON body", { cause: error });
  }
}
