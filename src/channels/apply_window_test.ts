import assert from "node:assert/strict";
import { createApplyWindow } from "./apply_window.ts";

Deno.test("createApplyWindow lets the callers of one window through together when it closes", async () => {
  const window = createApplyWindow(30);
  const started = performance.now();
  const passed: number[] = [];
  const first = window.next().then(() => passed.push(performance.now() - started));
  await new Promise((resolve) => setTimeout(resolve, 10));
  const second = window.next().then(() => passed.push(performance.now() - started));
  assert.deepEqual(passed, []);
  await Promise.all([first, second]);
  assert.equal(passed.length, 2);
  assert.ok(passed[0] >= 29, `the window closed after ${passed[0]} ms`);
  // Both passed in the same turn: the second did not wait for a window of its own.
  assert.ok(passed[1] - passed[0] < 5, `${passed[1] - passed[0]} ms apart`);
});

Deno.test("createApplyWindow opens a new window for a caller after one closed", async () => {
  const window = createApplyWindow(20);
  await window.next();
  const started = performance.now();
  await window.next();
  assert.ok(performance.now() - started >= 19);
});

Deno.test("createApplyWindow of 0 ms lets every caller through at once", async () => {
  const window = createApplyWindow(0);
  let passed = false;
  const next = window.next().then(() => passed = true);
  await Promise.resolve();
  assert.equal(passed, true);
  await next;
});
