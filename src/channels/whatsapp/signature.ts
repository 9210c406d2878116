/**
 * The `X-Hub-Signature-256` check of WhatsApp Cloud API webhooks (CONTRACT §6.1): Meta signs the
 * exact bytes it sends — JSON whose non-ASCII text is written as `\uXXXX` escapes — with
 * HMAC-SHA256 keyed by the app secret. The check must run over the raw request body, never a
 * re-serialization of the parsed JSON, which would turn those escapes into UTF-8 and change the
 * bytes. The comparison is constant-time so that a forger learns nothing from response timing.
 */
import { Buffer } from "node:buffer";
import { timingSafeEqual } from "node:crypto";
import { hmacSha256 } from "../../crypto/hmac_sha256.ts";

/** `sha256=` and 64 hex digits; Meta writes them lowercase, any case is accepted. */
const SIGNATURE_HEADER = /^sha256=([0-9a-f]{64})$/i;

/** The HMAC-SHA256 of `raw` keyed with `appSecret`. */
function digestOf(raw: Uint8Array, appSecret: string): Buffer {
  return hmacSha256(appSecret, raw);
}

/**
 * Whether `header` (the `X-Hub-Signature-256` value) is `sha256=` followed by the hex
 * HMAC-SHA256 of `raw` keyed with `appSecret`, compared in constant time. A missing or
 * malformed header (another algorithm such as `sha1=`, a wrong length, a non-hex digit) is
 * never valid, and neither is any header when `appSecret` is empty, since anyone could sign
 * with an empty key.
 */
export function isValidMetaSignature(
  raw: Uint8Array,
  header: string | null | undefined,
  appSecret: string,
): boolean {
  if (!couldBeMetaSignature(header, appSecret)) return false;
  const match = SIGNATURE_HEADER.exec(header!)!;
  return timingSafeEqual(Buffer.from(match[1], "hex"), digestOf(raw, appSecret));
}

/**
 * Whether `header` is a well-formed signature and `appSecret` set: checked before the body is
 * read, so that a request that cannot pass costs no upload.
 */
export function couldBeMetaSignature(
  header: string | null | undefined,
  appSecret: string,
): boolean {
  return Boolean(header) && appSecret !== "" && SIGNATURE_HEADER.test(header!);
}

/**
 * The `X-Hub-Signature-256` value Meta would send with `raw`: `sha256=` and the lowercase hex
 * HMAC-SHA256 of the bytes, keyed with `appSecret` (for tests and the fake Graph API).
 */
export function metaSignature(raw: Uint8Array, appSecret: string): string {
  return `sha256=${digestOf(raw, appSecret).toString("hex")}`;
}
