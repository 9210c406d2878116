import assert from "node:assert/strict";
import {
  type ApplyAttempt,
  ApplyDeferredError,
  asApplyFailure,
  createOrderedApply,
  RetryableApplyError,
} from "./ordered_apply.ts";

/**
 * A script of answers per request name, one per attempt: "ok", "retryable" or "fatal", answered
 * at once or, with "@ms", that many milliseconds later.
 */
function scripted(answers: Record<string, string[]>) {
  const log: string[] = [];
  const attemptOf = (name: string) => (): Promise<ApplyAttempt> =>
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
  const order = createOrderedApply({ name: "test", windowMs: 0 });
  const started: string[] = [];
  const answers: PromiseWithResolvers<void>[] = [];
  const requests = ["a", "b", "c"].map((name) =>
    order.apply(
      "k",
      () =>
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
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [30] });
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
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [20] });
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
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [10] });
  const { log, attemptOf } = scripted({ a: ["fatal"] });
  const a = settle(order.apply("k", attemptOf("a")));
  assert.equal(await a, "rejected: a refused");
  assert.equal(await settle(order.apply("k", attemptOf("b"))), "ok");
  assert.deepEqual(log, ["a", "b"]);
});

Deno.test("createOrderedApply() gives up retryWithinMs after the first failure, holding none back after", async () => {
  const order = createOrderedApply({
    name: "test",
    windowMs: 0,
    retryDelaysMs: [20],
    retryWithinMs: 70,
  });
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
  // Not the 2 s of a's 100 answers 20 ms apart, let alone b's after them.
  assert.ok(elapsed < 1_500, `${elapsed} ms`);
  // At 0, 20, 40 and 60 ms at most (fewer when timers run late on a busy machine), then no more.
  const tries = log.filter((name) => name === "a").length;
  assert.ok(tries >= 2 && tries <= 4, log.join());
  assert.equal(await settle(order.apply("k", attemptOf("c"))), "ok");
});

Deno.test("createOrderedApply() a success resets the deadline of a key's retries", async () => {
  const order = createOrderedApply({
    name: "test",
    windowMs: 0,
    retryDelaysMs: [20],
    // b's two 20 ms pauses must fit in it however late the timers run on a busy machine.
    retryWithinMs: 500,
  });
  const { attemptOf } = scripted({ a: ["retryable", "ok"], b: ["retryable", "retryable", "ok"] });
  assert.equal(await settle(order.apply("k", attemptOf("a"))), "ok");
  await new Promise((resolve) => setTimeout(resolve, 550)); // past a's deadline
  assert.equal(await settle(order.apply("k", attemptOf("b"))), "ok");
});

Deno.test("createOrderedApply() stop() ends the retries at once", async () => {
  // A pause as long as the deadline would be given up at once (a millisecond late): room for it.
  const order = createOrderedApply({
    name: "test",
    windowMs: 0,
    retryDelaysMs: [60_000],
    retryWithinMs: 600_000,
  });
  const { log, attemptOf } = scripted({ a: ["retryable"] });
  const a = settle(order.apply("k", attemptOf("a")));
  await new Promise((resolve) => setTimeout(resolve, 5));
  order.stop();
  assert.equal(await a, "rejected: a unreachable");
  assert.deepEqual(log, ["a"]);
});

Deno.test("createOrderedApply() fails a request whose preparation failed, and goes on", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0 });
  const { log, attemptOf } = scripted({});
  const broken = settle(order.apply("k", () => Promise.reject(new Error("unreadable"))));
  const next = settle(order.apply("k", attemptOf("b")));
  assert.deepEqual(await Promise.all([broken, next]), ["rejected: unreadable", "ok"]);
  assert.deepEqual(log, ["b"]);
});

Deno.test("createOrderedApply() holds at most maxHeld requests behind retries, failing the rest at once", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [30], maxHeld: 1 });
  const { log, attemptOf } = scripted({ a: ["retryable", "ok"] });
  const a = settle(order.apply("k", attemptOf("a")));
  await new Promise((resolve) => setTimeout(resolve, 5)); // a failed once and waits
  const b = settle(order.apply("k", attemptOf("b")));
  const c = settle(order.apply("k", attemptOf("c")));
  assert.equal(await c, "rejected: Too many requests held back behind retries");
  assert.ok(
    await order.apply("k", attemptOf("e")).then(() => null, (error) => error) instanceof
      ApplyDeferredError,
    "deferred, not failed: no attempt of its own",
  );
  assert.deepEqual(await Promise.all([a, b]), ["ok", "ok"]);
  assert.deepEqual(log, ["a", "a", "b"]);
  // Once the hold is over, the count is back to zero.
  assert.equal(await settle(order.apply("k", attemptOf("d"))), "ok");
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("createOrderedApply() holds back a request still being prepared when the one before fails", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [50] });
  const log: string[] = [];
  let tries = 0;
  const a = settle(order.apply("k", () =>
    Promise.resolve(async () => {
      log.push(`a#${++tries}`);
      await sleep(5);
      if (tries === 1) throw new RetryableApplyError("a unreachable");
    })));
  // b is handed over as soon as a is, but its preparation takes 20 ms: a has failed by then.
  const b = settle(order.apply("k", () =>
    sleep(20).then((): ApplyAttempt => () => {
      log.push("b");
      return Promise.resolve();
    })));
  assert.deepEqual(await Promise.all([a, b]), ["ok", "ok"]);
  assert.deepEqual(log, ["a#1", "a#2", "b"]);
});

Deno.test("createOrderedApply() stop() leaves the requests held behind a retry unapplied", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [1_000] });
  const { log, attemptOf } = scripted({ a: ["retryable"] });
  const failure = (promise: Promise<void>) => promise.then(() => null, (error: Error) => error);
  const a = failure(order.apply("k", attemptOf("a")));
  await sleep(10);
  const b = failure(order.apply("k", attemptOf("b")));
  await sleep(10);
  order.stop();
  const [aFailed, bFailed] = await Promise.all([a, b]);
  // Neither is to blame: both are left to recovery, and count no attempt.
  assert.ok(aFailed instanceof ApplyDeferredError);
  assert.equal(aFailed.message, "a unreachable");
  assert.ok(bFailed instanceof ApplyDeferredError);
  assert.equal(bFailed.message, "Stopped behind a request waiting for its retry");
  assert.deepEqual(log, ["a"], "b was not applied ahead of a");
});

Deno.test("createOrderedApply() retries in arrival order whatever order the failures come back in", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [30] });
  const { log, attemptOf } = scripted({ a: ["retryable@20", "ok"], b: ["retryable@1", "ok"] });
  const results = await Promise.all([
    settle(order.apply("k", attemptOf("a"))),
    settle(order.apply("k", attemptOf("b"))),
  ]);
  assert.deepEqual(results, ["ok", "ok"]);
  assert.deepEqual(log, ["a", "b", "a", "b"]);
});

Deno.test("createOrderedApply() prepares again a request whose preparation failed retryably", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [10] });
  const { log, attemptOf } = scripted({});
  let preparations = 0;
  const a = settle(order.apply("k", () => {
    preparations++;
    return preparations === 1
      ? Promise.reject(new RetryableApplyError("lookup unreachable"))
      : attemptOf("a")();
  }));
  const b = settle(order.apply("k", attemptOf("b")));
  assert.deepEqual(await Promise.all([a, b]), ["ok", "ok"]);
  assert.equal(preparations, 2);
  assert.deepEqual(log, ["a", "b"]);
});

Deno.test("asApplyFailure() makes a database that was not reached retryable, and nothing else", () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
  assert.ok(asApplyFailure(refused) instanceof RetryableApplyError);
  const bug = new TypeError("x is undefined");
  assert.equal(asApplyFailure(bug), bug);
  const retryable = new RetryableApplyError("already");
  assert.equal(asApplyFailure(retryable), retryable);
});

Deno.test("createOrderedApply() keeps a request waiting for a slot behind the failures that free it", async () => {
  const order = createOrderedApply({
    name: "test",
    windowMs: 1,
    maxInFlight: 2,
    retryDelaysMs: [30],
  });
  const applied: number[] = [];
  const crash = Promise.withResolvers<void>();
  const tried = new Set<number>();
  const attempt = (i: number) => () =>
    Promise.resolve(async () => {
      if (!tried.has(i) && i < 3) {
        tried.add(i);
        await crash.promise;
        throw new RetryableApplyError("worker died");
      }
      applied.push(i);
    });
  const all = [1, 2, 3].map((i) => order.apply("app", attempt(i)));
  await sleep(50);
  crash.resolve();
  await Promise.all(all);
  assert.deepEqual(applied, [1, 2, 3]);
});

Deno.test("createOrderedApply() once a retry succeeds, the failed requests behind it go on without pausing", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 1, retryDelaysMs: [300] });
  const down = Promise.withResolvers<void>();
  const tried = new Set<number>();
  const attempt = (i: number) => () =>
    Promise.resolve(async () => {
      if (tried.has(i)) return;
      tried.add(i);
      await down.promise;
      throw new RetryableApplyError("unreachable");
    });
  const all = Array.from({ length: 20 }, (_, i) => order.apply("app", attempt(i)));
  await sleep(20);
  const failedAt = performance.now();
  down.resolve();
  await Promise.all(all);
  const elapsed = performance.now() - failedAt;
  // One pause for the first retry; the 19 behind it follow at once (not 20 pauses: 6 s).
  assert.ok(elapsed < 1_500, `${elapsed} ms`);
});

Deno.test("createOrderedApply() moves a key to a later epoch at each retryable failure", async () => {
  const order = createOrderedApply({ name: "test", windowMs: 0, retryDelaysMs: [10] });
  const seen: string[] = [];
  const epochs: number[] = [];
  const failFirst = new Set(["a", "b"]);
  const answerA = Promise.withResolvers<void>();
  const attempt = (name: string) => (): Promise<ApplyAttempt> =>
    Promise.resolve(async (place) => {
      seen.push(`${name}@${place.stream}`);
      epochs.push(place.epoch);
      if (name === "a" && epochs.length === 1) await answerA.promise;
      if (failFirst.delete(name)) throw new RetryableApplyError(`${name} unreachable`);
    });
  const a = order.apply("k", attempt("a"));
  const b = order.apply("k", attempt("b"));
  await new Promise((resolve) => setTimeout(resolve, 5));
  // b was handed over before a's failure: the same epoch (its actor refuses it once a failed).
  assert.deepEqual(seen, ["a@test:k", "b@test:k"]);
  assert.equal(epochs[1], epochs[0]);
  answerA.resolve();
  await Promise.all([a, b]);
  assert.deepEqual(seen.slice(2), ["a@test:k", "b@test:k"], "retried in arrival order");
  assert.ok(epochs[2] > epochs[0], "a's retry comes at a later epoch");
  assert.ok(epochs[3] >= epochs[2]);
  // The key's state is dropped once nothing is pending; a new one never reuses an old epoch.
  await order.apply("k", attempt("c"));
  assert.ok(epochs[4] > epochs[3], "a key made again starts past every fence");
});
