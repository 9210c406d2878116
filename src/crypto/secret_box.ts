/**
 * Secrets at rest (CONTRACT §7): channel tokens, app secrets and webhook secrets are stored
 * AES-256-GCM encrypted with `PARLEY_ENCRYPTION_KEY` as `v1:<iv base64>:<ciphertext+tag base64>`,
 * so a copy of the database alone reveals none of them. The version prefix leaves room for a
 * later key rotation.
 */
import { Buffer } from "node:buffer";
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/** Encrypts and decrypts short secrets with one key. */
export interface SecretBox {
  /** The sealed form of `plaintext`; a fresh IV every time. */
  seal(plaintext: string): string;
  /** The plaintext of a sealed value; throws when it was not sealed with this key. */
  open(sealed: string): string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Creates a box for a 32-byte key. */
export function createSecretBox(key: Uint8Array): SecretBox {
  if (key.length !== 32) {
    throw new RangeError(`Cannot create secret box: the key must be 32 bytes, got ${key.length}`);
  }
  return {
    seal(plaintext) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const body = Buffer.concat([
        cipher.update(plaintext, "utf8"),
        cipher.final(),
        cipher.getAuthTag(),
      ]);
      return `v1:${iv.toString("base64")}:${body.toString("base64")}`;
    },
    open(sealed) {
      const match = /^v1:([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$/.exec(sealed);
      if (!match) throw new TypeError("Cannot open secret: not a v1 sealed value");
      const iv = Buffer.from(match[1], "base64");
      const body = Buffer.from(match[2], "base64");
      if (iv.length !== IV_BYTES || body.length < TAG_BYTES) {
        throw new TypeError("Cannot open secret: malformed sealed value");
      }
      const decipher = createDecipheriv("aes-256-gcm", key, iv);
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([
        decipher.update(body.subarray(0, body.length - TAG_BYTES)),
        decipher.final(),
      ])
        .toString("utf8");
    },
  };
}
