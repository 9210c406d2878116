import assert from "node:assert/strict";
import { createBucketNames } from "./bucket_names.ts";
import { sha256Hex } from "../crypto/tokens.ts";

Deno.test("createBucketNames() names a secret by its hash, never the secret itself", () => {
  const bucketOf = createBucketNames({ prefix: "widget:", capacity: 2 });
  const secret = "pv_1_" + "a".repeat(64);
  const name = bucketOf(secret);
  assert.equal(name, `widget:${sha256Hex(secret).slice(0, 32)}`);
  assert.ok(!name.includes(secret.slice(5)));
  assert.equal(bucketOf(secret), name);
  // Past its capacity it forgets, and names the same secret the same way again.
  bucketOf("b");
  bucketOf("c");
  assert.equal(bucketOf(secret), name);
  assert.notEqual(bucketOf("b"), bucketOf("c"));
});

Deno.test("createBucketNames() names a secret too long to remember the same way, every time", () => {
  const bucketOf = createBucketNames({ prefix: "api:", maxRememberedLength: 10 });
  const long = "Bearer " + "x".repeat(100);
  assert.equal(bucketOf(long), `api:${sha256Hex(long).slice(0, 32)}`);
  assert.equal(bucketOf(long), bucketOf(long));
});
