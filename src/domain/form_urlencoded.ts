/**
 * `application/x-www-form-urlencoded` bodies parsed as the WHATWG URL Standard says (split on `&`,
 * then on the first `=`, `+` as a space, `%XX` as a byte), except that the bytes must make UTF-8:
 * where `URLSearchParams` puts U+FFFD for an escape such as `%FF` — storing something the client
 * never sent — this answers null, so that the body is refused like a JSON body that is not UTF-8.
 * {@linkcode formFieldBytes} reads one field as the bytes it spells, UTF-8 or not.
 */

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const AMPERSAND = 0x26;
const EQUALS = 0x3d;
const PLUS = 0x2b;
const PERCENT = 0x25;
const SPACE = 0x20;

/** The value of hex digit `byte`, or -1. */
function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x41 + 10;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x61 + 10;
  return -1;
}

/** `bytes` with `+` as a space and each `%XX` as its byte; a `%` without two hex digits stays. */
function percentDecode(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(bytes.length);
  let length = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (byte === PLUS) {
      out[length++] = SPACE;
    } else if (
      byte === PERCENT && i + 2 < bytes.length && hexValue(bytes[i + 1]) >= 0 &&
      hexValue(bytes[i + 2]) >= 0
    ) {
      out[length++] = hexValue(bytes[i + 1]) * 16 + hexValue(bytes[i + 2]);
      i += 2;
    } else {
      out[length++] = byte;
    }
  }
  return out.subarray(0, length);
}

/** The text of `bytes`, or null when they are not UTF-8. */
function utf8(bytes: Uint8Array): string | null {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return null;
  }
}

/** The percent-decoded name and value bytes of each field of a form body, in order. */
function* decodedFields(
  body: Uint8Array,
): Generator<[Uint8Array<ArrayBuffer>, Uint8Array<ArrayBuffer>]> {
  let start = 0;
  while (start <= body.length) {
    let end = body.indexOf(AMPERSAND, start);
    if (end === -1) end = body.length;
    const sequence = body.subarray(start, end);
    start = end + 1;
    if (sequence.length === 0) continue;
    const equals = sequence.indexOf(EQUALS);
    yield [
      percentDecode(equals === -1 ? sequence : sequence.subarray(0, equals)),
      percentDecode(equals === -1 ? new Uint8Array() : sequence.subarray(equals + 1)),
    ];
  }
}

/** The name-value pairs of a form body, in order; null when a name or value is not UTF-8. */
export function parseFormUrlencoded(body: Uint8Array): [string, string][] | null {
  const pairs: [string, string][] = [];
  for (const [nameBytes, valueBytes] of decodedFields(body)) {
    const name = utf8(nameBytes);
    const value = utf8(valueBytes);
    if (name === null || value === null) return null;
    pairs.push([name, value]);
  }
  return pairs;
}

const encoder = new TextEncoder();
const lenientUtf8 = new TextDecoder();

/**
 * The bytes the first `name` field of `form` (a URL's query, with or without its `?`) spells,
 * even when they are not UTF-8 — what an echo "byte for byte" needs (Meta's `hub.challenge`,
 * CONTRACT §6.1), where `URLSearchParams` and Hono give U+FFFD or the escapes as text; null when
 * there is no such field.
 */
export function formFieldBytes(form: string, name: string): Uint8Array<ArrayBuffer> | null {
  const body = encoder.encode(form.startsWith("?") ? form.slice(1) : form);
  for (const [field, value] of decodedFields(body)) {
    if (lenientUtf8.decode(field) === name) return value;
  }
  return null;
}
