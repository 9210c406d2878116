import assert from "node:assert/strict";
import { MAX_RESUME_MS, resumePoint } from "./widget_socket.ts";
import { AppError } from "../domain/app_error.ts";

const NOW = Date.parse("2026-11-25T12:00:00Z");

Deno.test("resumePoint() starts a second before the time the client names", () => {
  assert.equal(resumePoint(undefined, NOW), null);
  assert.equal(
    resumePoint("2026-11-25T11:59:00.123456Z", NOW)?.toISOString(),
    "2026-11-25T11:58:59.123Z",
  );
  assert.equal(
    resumePoint("2026-11-25T13:00:00+02:00", NOW)?.toISOString(),
    "2026-11-25T10:59:59.000Z",
  );
});

Deno.test("resumePoint() keeps a time to come at now, and one long ago at its furthest", () => {
  assert.equal(resumePoint("2030-01-01T00:00:00Z", NOW)?.getTime(), NOW - 1_000);
  assert.equal(resumePoint("2020-01-01T00:00:00Z", NOW)?.getTime(), NOW - MAX_RESUME_MS);
});

Deno.test("resumePoint() refuses what is no ISO 8601 time with a zone", () => {
  for (
    const since of [
      "",
      "yesterday",
      "2026-11-25",
      "2026-11-25T11:59:00",
      "1764072000",
      "2026-02-30T00:00:00Z",
    ]
  ) {
    assert.throws(
      () => resumePoint(since, NOW),
      (error) => error instanceof AppError && error.status === 400,
      since,
    );
  }
});
