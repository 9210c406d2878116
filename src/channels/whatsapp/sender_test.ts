import assert from "node:assert/strict";
import { judgeGraphFailure } from "./sender.ts";

const failure = (status: number, code: number | null) => ({
  status,
  code,
  subcode: null,
  message: "x",
  retryAfterMs: null,
});

Deno.test("judgeGraphFailure retries rate limits, server errors and lost answers", () => {
  const cases: [number, number | null][] = [[429, 130429], [400, 131056], [500, 1], [503, null], [
    0,
    null,
  ]];
  for (const [status, code] of cases) {
    assert.equal(judgeGraphFailure(failure(status, code)), "retry", `${status}/${code}`);
  }
});

Deno.test("judgeGraphFailure fails the message and flags the channel when Meta refuses its token", () => {
  assert.equal(judgeGraphFailure(failure(401, 190)), "attention");
  assert.equal(judgeGraphFailure(failure(400, 190)), "attention");
  assert.equal(judgeGraphFailure(failure(401, null)), "attention");
});

Deno.test("judgeGraphFailure fails other refusals at once, the closed window included", () => {
  for (const code of [100, 131026, 131047, 132000]) {
    assert.equal(judgeGraphFailure(failure(400, code)), "fail", String(code));
  }
});
