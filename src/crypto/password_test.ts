import assert from "node:assert/strict";
import { hashPassword, verifyPassword } from "./password.ts";

Deno.test("a password hash verifies its password and nothing else", async () => {
  const stored = await hashPassword("correct horse battery");
  assert.match(stored, /^scrypt\$32768\$8\$3\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/);
  assert.ok(!stored.includes("correct horse battery"));
  assert.equal(await verifyPassword("correct horse battery", stored), true);
  assert.equal(await verifyPassword("correct horse batterY", stored), false);
  assert.equal(await verifyPassword("", stored), false);
});

Deno.test("two hashes of one password differ (random salt)", async () => {
  const [a, b] = await Promise.all([hashPassword("same-password"), hashPassword("same-password")]);
  assert.notEqual(a, b);
  assert.equal(await verifyPassword("same-password", b), true);
});

Deno.test("a malformed stored hash never verifies", async () => {
  for (
    const stored of [
      "",
      "plain",
      "scrypt$1$2$3",
      "bcrypt$32768$8$1$AAAA$AAAA",
      "scrypt$x$8$1$AA$AA",
    ]
  ) {
    assert.equal(await verifyPassword("x", stored), false, stored);
  }
});

Deno.test("a hash stored with an earlier cost still verifies", async () => {
  // N = 2^15, r = 8, p = 1: the cost new hashes had before.
  const { scryptSync } = await import("node:crypto");
  const salt = new Uint8Array(16).fill(7);
  const key = scryptSync("old password", salt, 32, { N: 32768, r: 8, p: 1, maxmem: 64 << 20 });
  const stored = ["scrypt", 32768, 8, 1, btoa(String.fromCharCode(...salt)), key.toString("base64")]
    .join("$");
  assert.equal(await verifyPassword("old password", stored), true);
  assert.equal(await verifyPassword("new password", stored), false);
});
