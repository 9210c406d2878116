import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { hmacSha256 } from "./hmac_sha256.ts";

Deno.test("hmacSha256 equals node's createHmac for any key and message", () => {
  fc.assert(
    fc.property(
      fc.string({ unit: "binary", maxLength: 150 }),
      fc.array(fc.oneof(fc.string({ unit: "binary" }), fc.uint8Array()), { maxLength: 4 }),
      (key, parts) => {
        const expected = createHmac("sha256", key);
        for (const part of parts) expected.update(part);
        assert.deepEqual(hmacSha256(key, ...parts), expected.digest());
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("hmacSha256 matches RFC 4231's test case 2 and stays right when a key is reused", () => {
  const expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
  for (let i = 0; i < 3; i++) {
    assert.equal(hmacSha256("Jefe", "what do ya want ", "for nothing?").toString("hex"), expected);
  }
});
