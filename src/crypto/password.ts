/**
 * Password hashing for dashboard users (CONTRACT §7: passwords are stored as hashes only).
 * scrypt from `node:crypto` with a 16-byte random salt, stored as
 * `scrypt$<N>$<r>$<p>$<salt base64>$<hash base64>` so that the cost can rise later without
 * invalidating stored hashes.
 */
import { Buffer } from "node:buffer";
import { scrypt, timingSafeEqual } from "node:crypto";

/**
 * scrypt's cost parameters for new hashes: N = 2^15, r = 8, p = 3, one of the settings OWASP gives as
 * its minimum (as strong as N = 2^17, p = 1, with a quarter of the memory: 32 MiB per hash).
 */
const COST = { N: 32768, r: 8, p: 3 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;

function derive(
  password: string,
  salt: Uint8Array,
  cost: { N: number; r: number; p: number },
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    scrypt(
      password.normalize("NFC"),
      salt,
      KEY_BYTES,
      { ...cost, maxmem: 256 * cost.N * cost.r },
      (error, key) => error ? reject(error) : resolve(new Uint8Array(key)),
    );
  });
}

/** A new salted hash of `password`, in the stored format. */
export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.getRandomValues(new Uint8Array(SALT_BYTES));
  const key = await derive(password, salt, COST);
  const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
  return ["scrypt", COST.N, COST.r, COST.p, base64(salt), base64(key)].join("$");
}

/** Whether `password` matches a stored hash (constant-time); false for a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  if (![N, r, p].every(Number.isSafeInteger) || N > 2 ** 20 || r > 32 || p > 16) return false;
  const salt = Buffer.from(parts[4], "base64");
  const expected = Buffer.from(parts[5], "base64");
  if (salt.length === 0 || expected.length !== KEY_BYTES) return false;
  const key = await derive(password, salt, { N, r, p });
  return timingSafeEqual(key, expected);
}
