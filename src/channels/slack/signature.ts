/**
 * Slack's v0 request signing (CONTRACT §6.2): every request Slack sends to `/events` and
 * `/actions` carries `X-Slack-Request-Timestamp` and `X-Slack-Signature: v0=<hex>`, the
 * HMAC-SHA256 of `v0:<timestamp>:<raw body>` keyed with the app's signing secret. The check runs
 * over the raw bytes, before any parsing (a re-serialized body would not match), compares in
 * constant time so that response timing tells a forger nothing, and refuses timestamps more than
 * five minutes away from now in either direction so that a captured request cannot be replayed.
 */
import { Buffer } from "node:buffer";
import { timingSafeEqual } from "node:crypto";
import { hmacSha256 } from "../../crypto/hmac_sha256.ts";

/** `v0=` and 64 hex digits; Slack writes them lowercase, any case is accepted. */
const SIGNATURE_HEADER = /^v0=([0-9a-f]{64})$/i;
/** Unix seconds: digits only (no sign, no fraction, no exponent). */
const TIMESTAMP_HEADER = /^\d{1,15}$/;
/** How far a request's timestamp may be from now, either way, as Slack recommends. */
const MAX_SKEW_SECONDS = 5 * 60;

/** The HMAC-SHA256 of Slack's base string for `raw` sent at `timestamp`. */
function digestOf(raw: Uint8Array, timestamp: string, signingSecret: string): Buffer {
  return hmacSha256(signingSecret, `v0:${timestamp}:`, raw);
}

/**
 * Slack's v0 signature of a request: `v0=` + hex HMAC-SHA256(signingSecret,
 * `v0:${timestamp}:${raw body}`), as Slack sends it in `X-Slack-Signature` (for tests and the
 * fake Slack).
 */
export function slackSignature(raw: Uint8Array, timestamp: string, signingSecret: string): string {
  return `v0=${digestOf(raw, timestamp, signingSecret).toString("hex")}`;
}

/**
 * Whether a request is Slack's: its `X-Slack-Signature` is the v0 signature of the RAW bytes,
 * compared in constant time, and its `X-Slack-Request-Timestamp` (Unix seconds, digits only) is
 * within 5 minutes of `nowMs` either way. False for a missing or malformed header, and for a
 * null or empty secret — with no signing secret configured every request is refused, since
 * anyone could sign with an empty key.
 */
export function isValidSlackRequest(
  raw: Uint8Array,
  headers: SlackSigningHeaders,
  signingSecret: string | null,
  nowMs: number = Date.now(),
): boolean {
  if (!couldBeSlackRequest(headers, signingSecret, nowMs)) return false;
  const match = SIGNATURE_HEADER.exec(headers.signature!)!;
  return timingSafeEqual(
    Buffer.from(match[1], "hex"),
    digestOf(raw, headers.timestamp!, signingSecret!),
  );
}

/** The headers Slack signs a request with. */
export interface SlackSigningHeaders {
  timestamp: string | null | undefined;
  signature: string | null | undefined;
}

/**
 * Whether a request's headers alone leave it possibly Slack's (a secret is set, the signature
 * is well-formed, the timestamp within 5 minutes of `nowMs`): checked before its body is read,
 * so that a request that cannot pass costs no upload.
 */
export function couldBeSlackRequest(
  headers: SlackSigningHeaders,
  signingSecret: string | null,
  nowMs: number = Date.now(),
): boolean {
  const { timestamp, signature } = headers;
  if (!signingSecret || !timestamp || !signature) return false;
  if (!TIMESTAMP_HEADER.test(timestamp)) return false;
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > MAX_SKEW_SECONDS) return false;
  return SIGNATURE_HEADER.test(signature);
}
