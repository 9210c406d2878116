/**
 * HMAC-SHA256 (RFC 2104) for verifying webhook signatures on the hot path. A key's padded inner
 * and outer hash states are computed once and copied for every message, which halves the cost
 * of `createHmac` (that re-derives them from the key on each call); the digest is the same.
 */
import { Buffer } from "node:buffer";
import { createHash, type Hash } from "node:crypto";
import { createLruCache } from "../cache/lru_cache.ts";

/** SHA-256's block size: keys are padded (or first hashed) to it. */
const BLOCK_BYTES = 64;

/** A key's hash states after its inner and outer pads. */
interface KeyedStates {
  inner: Hash;
  outer: Hash;
}

/** The states of recently used keys: a handful of configured secrets, bounded all the same. */
const states = createLruCache<string, KeyedStates>(256);

function statesOf(key: string): KeyedStates {
  const known = states.get(key);
  if (known) return known;
  const utf8: Uint8Array = Buffer.from(key, "utf8");
  const bytes = utf8.length > BLOCK_BYTES ? createHash("sha256").update(utf8).digest() : utf8;
  const block = Buffer.alloc(BLOCK_BYTES);
  block.set(bytes);
  const pad = (byte: number) => Buffer.from(block.map((b) => b ^ byte));
  const keyed = {
    inner: createHash("sha256").update(pad(0x36)),
    outer: createHash("sha256").update(pad(0x5c)),
  };
  states.set(key, keyed);
  return keyed;
}

/** The HMAC-SHA256 of the concatenation of `parts` (UTF-8 for strings), keyed with `key`. */
export function hmacSha256(key: string, ...parts: (Uint8Array | string)[]): Buffer {
  const { inner, outer } = statesOf(key);
  const hash = inner.copy();
  for (const part of parts) hash.update(part);
  return outer.copy().update(hash.digest()).digest();
}
