/**
 * JSON text as Parley accepts it from clients: it must parse, nest at most
 * {@linkcode MAX_JSON_DEPTH} arrays and objects deep (deeper documents overflow the stack of
 * whatever walks them next — the structured clone to a worker, among others), and a lone UTF-16
 * surrogate escaped in it (`"\ud800"`) becomes U+FFFD, as it does in plain text, since
 * PostgreSQL's jsonb refuses it.
 */

/** How deeply arrays and objects may nest in a client's JSON. */
export const MAX_JSON_DEPTH = 64;

/** What {@linkcode parseJsonDocument} found. */
export type JsonDocument =
  | { ok: true; value: unknown }
  | { ok: false; reason: "syntax" | "depth"; cause?: unknown };

/** An escaped UTF-16 surrogate, paired or not (paired ones come through unchanged). */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/** Parses `text` as a client's JSON (see the module's rules). */
export function parseJsonDocument(text: string): JsonDocument {
  let value: unknown;
  try {
    value = SURROGATE_ESCAPE.test(text) ? JSON.parse(text, wellFormed) : JSON.parse(text);
  } catch (cause) {
    return { ok: false, reason: "syntax", cause };
  }
  return nestsDeeperThan(value, MAX_JSON_DEPTH)
    ? { ok: false, reason: "depth" }
    : { ok: true, value };
}

/** Whether arrays and objects nest more than `limit` levels in `value` (without recursion). */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== "object") return false;
  const stack: [object, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > limit) return true;
    const children: unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (const child of children) {
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** A `JSON.parse` reviver that replaces lone surrogates in strings and keys with U+FFFD. */
function wellFormed(_key: string, value: unknown): unknown {
  if (typeof value === "string") return value.toWellFormed();
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const entries = Object.entries(value);
  if (entries.every(([key]) => key.isWellFormed())) return value;
  return Object.fromEntries(entries.map(([key, child]) => [key.toWellFormed(), child]));
}

/**
 * Platform text as PostgreSQL can store it: a NUL (which text columns refuse) and a lone
 * surrogate (which jsonb refuses) would fail the whole transaction that writes it; both become
 * U+FFFD.
 */
export function storableText(text: string): string {
  return text.toWellFormed().replaceAll("\u0000", "\uFFFD");
}

/** A body parsed as JSON; undefined when it is not JSON. */
export function parseJsonBytes(body: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(body));
  } catch {
    return undefined;
  }
}
