/**
 * Request body parsing in the contract's terms: a body that does not parse for its
 * Content-Type is `400 Invalid JSON body`; a Content-Type the route does not take is
 * `415 Unsupported content type`.
 */
import type { Context } from "hono";
import { AppError } from "../domain/app_error.ts";
import { type JsonDocumentOptions, parseJsonDocument } from "../domain/json_document.ts";
import { parseFormUrlencoded } from "../domain/form_urlencoded.ts";
import { arrivedWithin } from "./middleware/body_size_limit.ts";

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
 * Reads the body as a plain object. Form bodies give string values, and must make UTF-8 like JSON
 * bodies. A JSON value other than an object names no fields: it reads as `{}`, so that the route
 * reports the fields it lacks. `options.integerKeys`: JSON numbers of those fields are judged by
 * their text (ids: see {@linkcode JsonDocumentOptions}).
 */
export async function readBody(
  c: Context,
  accepted: BodyEncoding[],
  options: JsonDocumentOptions = {},
): Promise<Record<string, unknown>> {
  const bytes = await arrivedWithin(c.req.arrayBuffer());
  const encoding = encodingOf(c, accepted);
  if (encoding === null) throw new AppError(415, "Unsupported content type");
  if (encoding === "form") {
    const pairs = parseFormUrlencoded(new Uint8Array(bytes));
    if (pairs === null) throw new AppError(400, "Invalid JSON body");
    return Object.fromEntries(pairs);
  }
  const value = parseJson(bytes, options);
  if (value === null || typeof value !== "object" || Array.isArray(value)) return {};
  return value as Record<string, unknown>;
}

/**
 * Reads a JSON body as whatever value it holds, for routes that judge its shape themselves.
 * `optional`: a blank body (no content at all, or only whitespace) is `undefined`, whatever its
 * Content-Type.
 */
export async function readJson(
  c: Context,
  options: { optional?: boolean } = {},
): Promise<unknown> {
  const bytes = await arrivedWithin(c.req.arrayBuffer());
  if (options.optional && lenientUtf8.decode(bytes).trim() === "") return undefined;
  if (encodingOf(c, ["json"]) === null) throw new AppError(415, "Unsupported content type");
  return parseJson(bytes);
}

const lenientUtf8 = new TextDecoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A JSON body's value: its bytes must be UTF-8 (RFC 8259) and its text a client's JSON
 * document as {@linkcode parseJsonDocument} takes it, else `400 Invalid JSON body`.
 */
function parseJson(bytes: ArrayBuffer, options: JsonDocumentOptions = {}): unknown {
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch (error) {
    throw new AppError(400, "Invalid JSON body", { cause: error });
  }
  const document = parseJsonDocument(text, options);
  if (!document.ok) throw new AppError(400, "Invalid JSON body", { cause: document.cause });
  return document.value;
}
