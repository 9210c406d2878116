import assert from "node:assert/strict";
import { createLruCache } from "./lru_cache.ts";

Deno.test("createLruCache evicts the least recently used entry", () => {
  const cache = createLruCache<string, number>(2);
  cache.set("a", 1);
  cache.set("b", 2);
  assert.equal(cache.get("a"), 1); // a is now the most recent
  cache.set("c", 3);
  assert.equal(cache.get("b"), undefined);
  assert.equal(cache.get("a"), 1);
  assert.equal(cache.get("c"), 3);
  assert.equal(cache.size, 2);
});

Deno.test("createLruCache refuses a capacity below one", () => {
  assert.throws(() => createLruCache(0), RangeError);
});
