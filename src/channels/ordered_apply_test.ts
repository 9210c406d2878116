import assert from "node:assert/strict";
import { type ApplyAttempt, createOrderedApply, RetryableApplyError } from "./ordered_apply.ts";

/**
 * A script of answers per request name, one per attempt: "ok", "retryable" or "fatal", answered
 * at once or, with "@ms", that many milliseconds later.
 */
function scripted(answers: Record<string, string[]>) {
  const log: string[] = [];
  const attemptOf = (name: string): Promise<ApplyAttempt> =>
    Promise.resolve(async () => {
      log.push(name);
      const [answer, ms] = (answers[name]?.shift() ?? "ok").split("@");
      if (ms) await new Promise((resolve) => setTimeout(resolve, Number(ms)));
      if (answer === "retryable") throw new RetryableApplyError(`${name} unreachable`);
      if (answer === "fatal") throw new Error(`${name} refused`);
    });
  return { log, attemptOf };
}

function settle(promise: Promise<void>): Promise<string> {
  return promise.then(() => "ok", (error) => `rejected: ${error.message}`);
}

Deno.test("createOrderedApply() hands a key's requests over in order without waiting for answers", async () => {
  const order = createOrderedApply({ windowMs: 0 });
  const started: string[] = [];
  const answers: PromiseWithResolvers<void>[] = [];
  const requests = ["a", "b", "c"].map((name) =>
    order.apply(
      "k",
      Promise.resolve(() => {
        started.push(name);
        const answer = Promise.withResolvers<void>();
        answers.push(answer);
        return answer.promise;
      }),
    )
  );
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(started, ["a", "b", "c"], "all three handed over before any answer");
  for (const answer of answers) answer.resolve();
  await Promise.all(requests);
});

Deno.test("createOrderedApply() retries a retryable failure before the requests that arrive after it", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [30] });
  const { log, attemptOf } = scripted({ a: ["retryable", "retryable", "ok"] });
  const a = settle(order.apply("k", attemptOf("a")));
  await new Promise((resolve) => setTimeout(resolve, 5)); // a failed once and waits
  const b = settle(order.apply("k", attemptOf("b")));
  const other = settle(order.apply("other", attemptOf("x")));
  assert.equal(await other, "ok", "another key is not held back");
  assert.deepEqual(log, ["a", "x"]);
  assert.deepEqual(await Promise.all([a, b]), ["ok", "ok"]);
  assert.deepEqual(log, ["a", "x", "a", "a", "b"]);
});

Deno.test("createOrderedApply() retries failed requests in the order they arrived", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [20] });
  const { log, attemptOf } = scripted({
    a: ["retryable@10", "retryable", "ok"],
    b: ["retryable@10", "ok"],
    c: ["ok@10"],
  });
  const results = await Promise.all(
    ["a", "b", "c"].map((n) => settle(order.apply("k", attemptOf(n)))),
  );
  assert.deepEqual(results, ["ok", "ok", "ok"]);
  // a, b and c were handed over together; b's retry waited for a's.
  assert.deepEqual(log, ["a", "b", "c", "a", "a", "b"]);
});

Deno.test("createOrderedApply() never retries other failures", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [10] });
  const { log, attemptOf } = scripted({ a: ["fatal"] });
  const a = settle(order.apply("k", attemptOf("a")));
  assert.equal(await a, "rejected: a refused");
  assert.equal(await settle(order.apply("k", attemptOf("b"))), "ok");
  assert.deepEqual(log, ["a", "b"]);
});

Deno.test("createOrderedApply() gives up retryWithinMs after the first failure, holding none back after", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [20], retryWithinMs: 70 });
  const { log, attemptOf } = scripted({
    a: Array(100).fill("retryable"),
    b: Array(100).fill("retryable"),
  });
  const started = performance.now();
  const a = settle(order.apply("k", attemptOf("a")));
  const b = settle(order.apply("k", attemptOf("b")));
  assert.equal(await a, "rejected: a unreachable");
  assert.equal(await b, "rejected: b unreachable", "b's retries share a's deadline");
  const elapsed = performance.now() - started;
  assert.ok(elapsed < 300, `${elapsed} ms`);
  assert.equal(log.filter((name) => name === "a").length, 4, log.join()); // at 0, 20, 40, 60 ms
  assert.equal(await settle(order.apply("k", attemptOf("c"))), "ok");
});

Deno.test("createOrderedApply() a success resets the deadline of a key's retries", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [20], retryWithinMs: 50 });
  const { attemptOf } = scripted({ a: ["retryable", "ok"], b: ["retryable", "retryable", "ok"] });
  assert.equal(await settle(order.apply("k", attemptOf("a"))), "ok");
  await new Promise((resolve) => setTimeout(resolve, 60)); // past a's deadline
  assert.equal(await settle(order.apply("k", attemptOf("b"))), "ok");
});

Deno.test("createOrderedApply() stop() ends the retries at once", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [60_000] });
  const { log, attemptOf } = scripted({ a: ["retryable"] });
  const a = settle(order.apply("k", attemptOf("a")));
  await new Promise((resolve) => setTimeout(resolve, 5));
  order.stop();
  assert.equal(await a, "rejected: a unreachable");
  assert.deepEqual(log, ["a"]);
});

Deno.test("createOrderedApply() fails a request whose preparation failed, and goes on", async () => {
  const order = createOrderedApply({ windowMs: 0 });
  const { log, attemptOf } = scripted({});
  const broken = settle(order.apply("k", Promise.reject(new Error("unreadable"))));
  const next = settle(order.apply("k", attemptOf("b")));
  assert.deepEqual(await Promise.all([broken, next]), ["rejected: unreadable", "ok"]);
  assert.deepEqual(log, ["b"]);
});

Deno.test("createOrderedApply() holds at most maxHeld requests behind retries, failing the rest at once", async () => {
  const order = createOrderedApply({ windowMs: 0, retryDelaysMs: [30], maxHeld: 1 });
  const { log, attemptOf } = scripted({ a: ["retryable", "ok"] });
  const a = settle(order.apply("k", attemptOf("a")));
  await new Promise((resolve) => setTimeout(resolve, 5)); // a failed once and waits
  const b = settle(order.apply("k", attemptOf("b")));
  const c = settle(order.apply("k", attemptOf("c")));
  assert.equal(await c, "rejected: Too many requests held back behind retries");
  assert.deepEqual(await Promise.all([a, b]), ["ok", "ok"]);
  assert.deepEqual(log, ["a", "a", "b"]);
  // Once the hold is over, the count is back to zero.
  assert.equal(await settle(order.apply("k", attemptOf("d"))), "ok");
});
