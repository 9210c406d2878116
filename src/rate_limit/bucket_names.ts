/**
 * Rate-limit bucket names for secrets (visitor tokens, Open API credentials): a prefix and the
 * first 128 bits of the secret's SHA-256, so that the counters shared through PostgreSQL never
 * hold a secret. Names are remembered per secret: hashing on every request cost the widget's
 * message route more than validating its body.
 */
import { sha256Hex } from "../crypto/tokens.ts";
import { createLruCache } from "../domain/lru_cache.ts";

/** Options of {@linkcode createBucketNames}. */
export interface BucketNamesOptions {
  /** Put before every name, e.g. `"widget:"`. */
  prefix: string;
  /** Most secrets remembered. @default 50_000 */
  capacity?: number;
}

/** Creates a function from a secret to its bucket name. */
export function createBucketNames(options: BucketNamesOptions): (secret: string) => string {
  const { prefix, capacity = 50_000 } = options;
  const names = createLruCache<string, string>(capacity);
  return function bucketNameOf(secret) {
    let name = names.get(secret);
    if (name === undefined) {
      name = `${prefix}${sha256Hex(secret).slice(0, 32)}`;
      names.set(secret, name);
    }
    return name;
  };
}
