import assert from "node:assert/strict";
import fc from "fast-check";
import { decodeCursor, encodeCursor } from "./cursor.ts";

Deno.test("encodeCursor() output decodes to the same position", () => {
  fc.assert(fc.property(
    fc.date({ min: new Date("2000-01-01"), max: new Date("2099-12-31"), noInvalidDate: true }),
    fc.integer({ min: 0, max: 999 }),
    fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    (date, micros, id) => {
      const lastMessageAt = date.toISOString().replace("Z", `${String(micros).padStart(3, "0")}Z`);
      const cursor = encodeCursor({ lastMessageAt, id });
      assert.match(cursor, /^[A-Za-z0-9_-]+$/);
      assert.deepEqual(decodeCursor(cursor), { lastMessageAt, id });
    },
  ));
});

Deno.test("decodeCursor() refuses what it did not make", () => {
  for (
    const text of [
      "",
      "not a cursor!",
      btoa("2026-11-22T01:27:40.123456Z"),
      btoa("2026-11-22T01:27:40Z|5"),
      btoa("2026-11-22T01:27:40.123456Z|0"),
      btoa("2026-11-22T01:27:40.123456Z|5|6"),
      btoa("2026-13-45T01:27:40.123456Z|5"),
      btoa("2026-02-30T00:00:00.000000Z|5"),
      btoa("0000-01-01T00:00:00.000000Z|5"),
      "A".repeat(101),
    ]
  ) {
    assert.equal(decodeCursor(text.replace(/=+$/, "")), null, text);
  }
});
