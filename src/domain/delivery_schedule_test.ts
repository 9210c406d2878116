import assert from "node:assert/strict";
import { MAX_ATTEMPTS, nextRetryDelayMs, parseRetryAfter } from "./delivery_schedule.ts";

Deno.test("nextRetryDelayMs() follows 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then gives up", () => {
  const middle = (n: number) => nextRetryDelayMs(n, { random: 0 });
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7].map(middle),
    [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
  );
  assert.equal(MAX_ATTEMPTS, 8);
  assert.equal(nextRetryDelayMs(8), null);
  assert.throws(() => nextRetryDelayMs(0), RangeError);
});

Deno.test("nextRetryDelayMs() lengthens each delay by at most 10%, never shortens it", () => {
  assert.equal(nextRetryDelayMs(1, { random: 0 }), 5_000);
  assert.equal(nextRetryDelayMs(1, { random: 0.5 }), 5_250);
  assert.equal(nextRetryDelayMs(1, { random: 0.999999 }), 5_500);
  assert.equal(nextRetryDelayMs(7, { random: 0.999999 }), 39_599_996);
});

Deno.test("nextRetryDelayMs() honours a longer Retry-After, up to 10 hours", () => {
  assert.equal(nextRetryDelayMs(1, { random: 0.5, retryAfterMs: 60_000 }), 60_000);
  assert.equal(nextRetryDelayMs(2, { random: 0, retryAfterMs: 1_000 }), 300_000);
  assert.equal(nextRetryDelayMs(1, { random: 0.5, retryAfterMs: 1e12 }), 36_000_000);
});

Deno.test("parseRetryAfter() reads seconds and HTTP dates", () => {
  const now = Date.parse("2026-11-22T00:00:00Z");
  assert.equal(parseRetryAfter("120", now), 120_000);
  assert.equal(parseRetryAfter("Sun, 22 Nov 2026 00:01:00 GMT", now), 60_000);
  assert.equal(parseRetryAfter("soon", now), null);
  assert.equal(parseRetryAfter(null, now), null);
});
