import assert from "node:assert/strict";
import { formatTimestamp } from "./timestamp.ts";

Deno.test("formatTimestamp pads the fraction to six digits", () => {
  assert.equal(formatTimestamp("2026-11-22 01:27:40.1234+00"), "2026-11-22T01:27:40.123400Z");
  assert.equal(formatTimestamp("2026-11-22 01:27:40.123456+00"), "2026-11-22T01:27:40.123456Z");
});

Deno.test("formatTimestamp adds a zero fraction to whole seconds", () => {
  assert.equal(formatTimestamp("2026-11-22 01:27:40+00"), "2026-11-22T01:27:40.000000Z");
});

Deno.test("formatTimestamp refuses text that is not in UTC", () => {
  assert.throws(() => formatTimestamp("2026-11-22 01:27:40+02"), RangeError);
});
