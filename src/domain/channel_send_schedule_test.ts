import assert from "node:assert/strict";
import {
  MAX_SEND_RETRY_AFTER_MS,
  nextSendRetryDelayMs,
  SEND_RETRY_DELAYS_MS,
} from "./channel_send_schedule.ts";

Deno.test("nextSendRetryDelayMs follows the schedule, then gives up", () => {
  const delays = SEND_RETRY_DELAYS_MS.map((_, index) => nextSendRetryDelayMs(index + 1));
  assert.deepEqual(delays, [...SEND_RETRY_DELAYS_MS]);
  assert.equal(nextSendRetryDelayMs(SEND_RETRY_DELAYS_MS.length + 1), null);
});

Deno.test("nextSendRetryDelayMs jitters by at most 20% and honours Retry-After", () => {
  assert.equal(nextSendRetryDelayMs(1, { random: 0 }), 1_600);
  assert.equal(nextSendRetryDelayMs(1, { random: 0.999999 }), 2_400);
  assert.equal(nextSendRetryDelayMs(1, { retryAfterMs: 30_000 }), 30_000);
  assert.equal(nextSendRetryDelayMs(3, { retryAfterMs: 1_000 }), 60_000);
  // Ten years is not waited: a chat's later messages queue behind the send.
  assert.equal(nextSendRetryDelayMs(1, { retryAfterMs: 315_360_000_000 }), MAX_SEND_RETRY_AFTER_MS);
});

Deno.test("nextSendRetryDelayMs refuses a count that is not a positive integer", () => {
  assert.throws(() => nextSendRetryDelayMs(0), RangeError);
  assert.throws(() => nextSendRetryDelayMs(1.5), RangeError);
});
