/**
 * A query parameter's value as the bytes its percent-escapes spell (`application/x-www-form-
 * urlencoded`: `+` is a space), even when they are not UTF-8 — what an echo "byte for byte"
 * needs (Meta's `hub.challenge`, CONTRACT §6.1). `URLSearchParams` and Hono turn such bytes
 * into U+FFFD or leave the escapes as text.
 */

const encoder = new TextEncoder();

/** The bytes of the first `name` parameter of `search` (with or without its `?`); null if none. */
export function queryParamBytes(
  search: string,
  name: string,
): Uint8Array<ArrayBuffer> | null {
  const query = search.startsWith("?") ? search.slice(1) : search;
  for (const pair of query.split("&")) {
    const equals = pair.indexOf("=");
    const key = equals === -1 ? pair : pair.slice(0, equals);
    if (decodeText(key) !== name) continue;
    return equals === -1 ? new Uint8Array(0) : decodeBytes(pair.slice(equals + 1));
  }
  return null;
}

/** The bytes of a form-encoded component. */
function decodeBytes(component: string): Uint8Array<ArrayBuffer> {
  const bytes: number[] = [];
  for (let index = 0; index < component.length;) {
    const char = component[index];
    const escape = char === "%" ? component.slice(index + 1, index + 3) : "";
    if (/^[0-9A-Fa-f]{2}$/.test(escape)) {
      bytes.push(parseInt(escape, 16));
      index += 3;
    } else if (char === "+") {
      bytes.push(0x20);
      index += 1;
    } else {
      const codePoint = component.codePointAt(index)!;
      const text = String.fromCodePoint(codePoint);
      bytes.push(...encoder.encode(text));
      index += text.length;
    }
  }
  return new Uint8Array(bytes);
}

/** A form-encoded component as text (invalid UTF-8 as U+FFFD). */
function decodeText(component: string): string {
  return new TextDecoder().decode(decodeBytes(component));
}
