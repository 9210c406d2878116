/**
 * Rate-limit bucket names for secrets (visitor tokens, Open API credentials): a prefix and the
 * first 128 bits of the secret's SHA-256, so that the counters shared through PostgreSQL never
 * hold a secret. Names are remembered per secret: hashing on every request cost the widget's
 * message route more than validating its body.
 */
import { sha256Hex } from "../crypto/tokens.ts";
import { createLruCache } from "../cache/lru_cache.ts";

/** Options of {@linkcode createBucketNames}. */
export interface BucketNamesOptions {
  /** Put before every name, e.g. `"widget:"`. */
  prefix: string;
  /** Most secrets remembered. @default 50_000 */
  capacity?: number;
  /**
   * Longest secret remembered, in UTF-16 units: longer ones (never a real token or key) are
   * hashed every time, so that junk credentials cannot fill memory. @default 128
   */
  maxRememberedLength?: number;
}

/** Creates a function from a secret to its bucket name. */
export function createBucketNames(options: BucketNamesOptions): (secret: string) => string {
  const { prefix, capacity = 50_000, maxRememberedLength = 128 } = options;
  const names = createLruCache<string, string>(capacity);
  const nameOf = (secret: string) => `${prefix}${sha256Hex(secret).slice(0, 32)}`;
  return function bucketNameOf(secret) {
    if (secret.length > maxRememberedLength) return nameOf(secret);
    let name = names.get(secret);
    if (name === undefined) {
      name = nameOf(secret);
      names.set(secret, name);
    }
    return name;
  };
}
