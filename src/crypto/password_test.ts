import assert from "node:assert/strict";
import { hashPassword, verifyPassword } from "./password.ts";

Deno.test("a password hash verifies its password and nothing else", async () => {
  const stored = await hashPassword("correct horse battery");
  assert.match(stored, /^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/);
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
