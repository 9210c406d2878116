/**
 * Random tokens and their hashes. Tokens that grant access (visitor tokens, API keys) are
 * stored only as SHA-256 hashes, so a leaked table grants nothing.
 */
import { createHash } from "node:crypto";

/** `bytes` random bytes from the CSPRNG as lowercase hex. */
export function randomHex(bytes: number): string {
  const buffer = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * SHA-256 of the UTF-8 text as lowercase hex. Synchronous `node:crypto` on purpose: it runs
 * on every widget request, and Web Crypto's async digest costs about 15 times more.
 */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A new visitor token of application `appId`: `pv_<appId>_<64 hex>`. */
export function newVisitorToken(appId: number): string {
  return `pv_${appId}_${randomHex(32)}`;
}

/** The application id a visitor token claims, or null when the token is malformed. */
export function visitorTokenAppId(token: string): number | null {
  const match = /^pv_([1-9][0-9]{0,15})_[0-9a-f]{64}$/.exec(token);
  return match ? Number(match[1]) : null;
}

/** A new Open API key: `parley_` + 48 lowercase hex from the CSPRNG. */
export function newApiKey(): string {
  return `parley_${randomHex(24)}`;
}

/** Whether `text` has the shape of an Open API key (anything else is refused unread). */
export function isApiKeyFormat(text: string): boolean {
  return /^parley_[0-9a-f]{48}$/.test(text);
}

/** SHA-256 of the UTF-8 text as raw bytes (how API keys are stored). */
export function sha256Bytes(text: string): Uint8Array {
  return new Uint8Array(createHash("sha256").update(text).digest());
}
