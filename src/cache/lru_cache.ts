/**
 * A bounded map that forgets the least recently used entry first. For caches of facts that
 * cannot go stale (a visitor token's client), never of facts that can be revoked.
 */

/** A least-recently-used cache of at most `capacity` entries. */
export interface LruCache<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): void;
  readonly size: number;
}

/** Creates an empty cache holding at most `capacity` entries. */
export function createLruCache<K, V>(capacity: number): LruCache<K, V> {
  if (!Number.isInteger(capacity) || capacity < 1) {
    throw new RangeError(
      `Cannot create cache: capacity must be a positive integer, got ${capacity}`,
    );
  }
  const entries = new Map<K, V>();
  return {
    get(key) {
      const value = entries.get(key);
      if (value !== undefined) {
        entries.delete(key);
        entries.set(key, value);
      }
      return value;
    },
    set(key, value) {
      entries.delete(key);
      entries.set(key, value);
      if (entries.size > capacity) entries.delete(entries.keys().next().value as K);
    },
    get size() {
      return entries.size;
    },
  };
}
