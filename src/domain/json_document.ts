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

/** Options of {@linkcode parseJsonDocument}. */
export interface JsonDocumentOptions {
  /**
   * Keys whose number values are judged by their text, not by the double it rounds to (see
   * {@linkcode exactInteger}): an id must not name another record because `0.99999999999999999`
   * rounds to 1.
   */
  integerKeys?: ReadonlySet<string>;
}

/** Parses `text` as a client's JSON (see the module's rules). */
export function parseJsonDocument(text: string, options: JsonDocumentOptions = {}): JsonDocument {
  const { integerKeys } = options;
  const surrogates = SURROGATE_ESCAPE.test(text);
  let value: unknown;
  try {
    value = integerKeys
      ? JSON.parse(text, (key, value, context?: { source?: string }) => {
        if (typeof value === "number" && integerKeys.has(key) && context?.source !== undefined) {
          return exactInteger(context.source);
        }
        return surrogates ? wellFormed(key, value) : value;
      })
      : surrogates
      ? JSON.parse(text, wellFormed)
      : JSON.parse(text);
  } catch (cause) {
    return { ok: false, reason: "syntax", cause };
  }
  return nestsDeeperThan(value, MAX_JSON_DEPTH)
    ? { ok: false, reason: "depth" }
    : { ok: true, value };
}

/**
 * The integer a JSON number's text denotes: itself when it is a safe integer (`7`, `7.0`, `7e0`),
 * `±Number.MAX_VALUE` for an integer beyond the safe ones (`1e400`, `9007199254740993`: an
 * integer no id can be), and NaN when the text is no integer at all (`0.99999999999999999`, which
 * `JSON.parse` alone rounds to 1).
 */
export function exactInteger(source: string): number {
  // No lazy digits before a run of zeros here: that backtracks quadratically on a long fraction.
  const parts = /^(-?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(source);
  if (parts === null) return NaN;
  const [, sign, , digitsAfterPoint = "", exponentText = "0"] = parts;
  let fractionEnd = digitsAfterPoint.length;
  while (fractionEnd > 0 && digitsAfterPoint[fractionEnd - 1] === "0") fractionEnd--;
  const fraction = digitsAfterPoint.slice(0, fractionEnd);
  const exponent = Number(exponentText);
  const digits = parts[2] + fraction;
  const allZero = /^0*$/.test(digits);
  // Digits after the point that the exponent does not shift back in make a fraction.
  if (!allZero && exponent < fraction.length) {
    // …unless every digit the exponent leaves after the point is zero (`1200e-2`).
    const kept = digits.length - (fraction.length - exponent);
    if (kept <= 0 || !/^0*$/.test(digits.slice(kept))) return NaN;
  }
  const value = Number(source);
  if (Number.isSafeInteger(value)) return value === 0 ? 0 : value; // -0 is 0
  return sign === "-" ? -Number.MAX_VALUE : Number.MAX_VALUE;
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
