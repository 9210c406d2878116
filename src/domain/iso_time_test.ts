import assert from "node:assert/strict";
import { isoTimeMs } from "./iso_time.ts";

Deno.test("isoTimeMs() reads UTC times and times with an offset to the same instant", () => {
  const utc = Date.UTC(2026, 10, 22, 1, 27, 40, 123);
  assert.equal(isoTimeMs("2026-11-22T01:27:40.123456Z"), utc);
  assert.equal(isoTimeMs("2026-11-22T03:27:40.123+02:00"), utc);
  assert.equal(isoTimeMs("2026-11-21T20:57:40.123-04:30"), utc);
  assert.equal(isoTimeMs("2026-11-22T01:27:40Z"), utc - 123);
  assert.equal(isoTimeMs("2024-02-29T00:00:00Z"), Date.UTC(2024, 1, 29));
  assert.equal(isoTimeMs("2000-02-29T23:59:59.999999999Z"), Date.UTC(2000, 1, 29, 23, 59, 59, 999));
  assert.equal(isoTimeMs("0001-01-01T00:00:00Z"), -62135596800000);
  for (let ms = 0; ms < 1000; ms++) {
    const text = `2026-01-01T00:00:00.${String(ms).padStart(3, "0")}999Z`;
    assert.equal(isoTimeMs(text), Date.UTC(2026, 0, 1) + ms, text);
  }
});

Deno.test("isoTimeMs() refuses fields no calendar has", () => {
  for (
    const text of [
      "2026-02-30T00:00:00Z",
      "2026-02-29T00:00:00Z",
      "1900-02-29T00:00:00Z",
      "2026-04-31T00:00:00Z",
      "2026-13-01T00:00:00Z",
      "2026-00-10T00:00:00Z",
      "2026-01-00T00:00:00Z",
      "2026-01-01T24:00:00Z",
      "2026-01-01T00:60:00Z",
      "2026-12-31T23:59:60Z",
      "2026-01-01T00:00:00+24:00",
      "2026-01-01T00:00:00+01:60",
    ]
  ) assert.equal(isoTimeMs(text), null, text);
});

Deno.test("isoTimeMs() refuses other shapes", () => {
  for (
    const text of [
      "",
      "yesterday",
      "2026-01-01",
      "2026-01-01T00:00:00",
      "2026-01-01 00:00:00Z",
      "2026-01-01T00:00:00.Z",
      "2026-01-01T00:00:00.1234567890Z",
      "2026-01-01T00:00:00+0100",
      "+02026-01-01T00:00:00Z",
      "2026-01-01T00:00:00z",
    ]
  ) assert.equal(isoTimeMs(text), null, text);
});
