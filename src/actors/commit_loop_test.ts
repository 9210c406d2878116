import assert from "node:assert/strict";
import fc from "fast-check";
import {
  CommitOutcomeUnknown,
  createCommitLoop,
  INTERNAL_ERROR,
  UNAVAILABLE,
} from "./commit_loop.ts";
import type { AppCommand, CommandResult } from "./protocol.ts";
import { capturingErrors } from "../../tests/support/console.ts";

function message(appId: number, content: string): AppCommand {
  return { kind: "visitor.message", appId, clientId: 1, messageType: "text", content };
}

function contentOf(command: AppCommand): string {
  if (command.kind === "whatsapp.inbound") return `d${command.deliveryId}`;
  return command.kind === "visitor.message" ? command.content : "";
}

/** A stored WhatsApp delivery of application 1, at `epoch` of stream `stream`. */
function delivery(deliveryId: number, epoch: number, stream = "whatsapp:1"): AppCommand {
  return { kind: "whatsapp.inbound", appId: 1, deliveryId, entries: [], order: { stream, epoch } };
}

function okAll(commands: AppCommand[]): CommandResult[] {
  return commands.map((command) => ({ ok: true, value: contentOf(command) }));
}

/** A fake commit whose calls stay pending until the test releases them. */
function deferredCommit() {
  const calls: { batch: string[]; release: (fail?: boolean) => void }[] = [];
  const commit = (commands: AppCommand[]): Promise<CommandResult[]> => {
    const { promise, resolve, reject } = Promise.withResolvers<CommandResult[]>();
    calls.push({
      batch: commands.map(contentOf),
      release: (fail = false) =>
        fail ? reject(new Error("Fake failure")) : resolve(okAll(commands)),
    });
    return promise;
  };
  return { calls, commit };
}

function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

Deno.test("createCommitLoop() keeps per-key order, answers everything once, never overlaps a key", async () => {
  const step = fc.record({
    key: fc.integer({ min: 0, max: 3 }),
    poisoned: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
  });
  const printed = await capturingErrors(async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(step, { maxLength: 40 }),
        fc.array(fc.boolean(), { maxLength: 20 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 10 }),
        async (s, steps, transientFailures, maxBatch, maxInFlight, minConcurrentBatch) => {
          // Checked after the run: a throw inside commit would only look like a failed batch.
          const violations: string[] = [];
          const committed: string[] = [];
          const busyKeys = new Set<number>();
          /** Commands of failed batches: each is retried alone, within its batch's slot. */
          const failed = new Set<string>();
          let concurrent = 0;
          let calls = 0;
          const commit = async (commands: AppCommand[]): Promise<CommandResult[]> => {
            if (commands.length < 1 || commands.length > maxBatch) violations.push("batch size");
            const keys = new Set(commands.map((command) => command.appId));
            for (const key of keys) if (busyKeys.has(key)) violations.push(`key ${key} twice`);
            for (const key of keys) busyKeys.add(key);
            const retry = commands.length === 1 && failed.has(contentOf(commands[0]));
            const small = commands.length < Math.min(minConcurrentBatch, maxBatch);
            if (concurrent > 0 && small && !retry) {
              violations.push("small batch next to another");
            }
            if (++concurrent > maxInFlight) violations.push("too many batches in flight");
            const transient = transientFailures[calls++] ?? false;
            try {
              await s.schedule(Promise.resolve(), `commit ${commands.map(contentOf)}`);
              if (
                transient || commands.some((command) => contentOf(command).endsWith("!"))
              ) {
                for (const command of commands) failed.add(contentOf(command));
                throw new Error(transient ? "Transient failure" : "Poisoned");
              }
              committed.push(...commands.map(contentOf));
              return okAll(commands);
            } finally {
              concurrent--;
              for (const key of keys) busyKeys.delete(key);
            }
          };
          const loop = createCommitLoop({
            commit,
            maxBatch,
            maxInFlight,
            minConcurrentBatch,
            concurrentWaitMs: 60_000, // the fake commits never stall
          });
          const submitted: { key: number; content: string }[] = [];
          const answers = new Map<string, CommandResult>();
          const all = Promise.all(steps.map(async (step, index) => {
            await s.schedule(Promise.resolve(), `submit ${index}`);
            const content = `${step.key}:secret${index}${step.poisoned ? "!" : ""}`;
            submitted.push({ key: step.key, content });
            answers.set(content, await loop.submit(`app:${step.key}`, message(step.key, content)));
          }));
          await s.waitFor(all);
          await s.waitFor(loop.stop());

          assert.deepEqual(violations, []);
          assert.equal(answers.size, steps.length, "every submit answered");
          assert.equal(new Set(committed).size, committed.length, "nothing committed twice");
          const succeeded = submitted.filter(({ content }) => answers.get(content)?.ok);
          assert.deepEqual(new Set(committed), new Set(succeeded.map(({ content }) => content)));
          for (const key of [0, 1, 2, 3]) {
            assert.deepEqual(
              committed.filter((content) => content.startsWith(`${key}:`)),
              succeeded.filter((entry) => entry.key === key).map(({ content }) => content),
              `order of key ${key}`,
            );
          }
          for (const { content } of submitted) {
            const answer = answers.get(content)!;
            if (answer.ok) assert.equal(answer.value, content);
            else assert.deepEqual(answer, INTERNAL_ERROR);
            if (content.endsWith("!")) assert.equal(answer.ok, false, "poisoned command failed");
          }
          if (!transientFailures.includes(true)) {
            const healthy = submitted.filter(({ content }) => !content.endsWith("!"));
            assert.equal(succeeded.length, healthy.length, "without transient failures");
          }
        },
      ),
      { numRuns: 300 },
    );
  });
  assert.ok(printed.length > 0, "poisoned commands were logged");
  assert.ok(printed.every((line) => !line.includes("secret")), "logs never carry command content");
});

Deno.test("createCommitLoop() coalesces commands that arrive during a commit into one batch", async () => {
  const { calls, commit } = deferredCommit();
  const loop = createCommitLoop({ commit, maxInFlight: 1 });
  const first = loop.submit("app:1", message(1, "first"));
  await tick();
  assert.equal(calls.length, 1);
  const rest: Promise<CommandResult>[] = [];
  for (let i = 0; i < 100; i++) {
    rest.push(loop.submit(`app:${i % 10}`, message(i % 10, `m${i}`)));
    if (i % 7 === 0) await tick();
  }
  assert.equal(calls.length, 1, "nothing starts while the only slot is busy");
  calls[0].release();
  await first;
  await tick();
  assert.equal(calls.length, 2);
  assert.equal(calls[1].batch.length, 100);
  calls[1].release();
  assert.ok((await Promise.all(rest)).every((result) => result.ok));
  await loop.stop();
});

Deno.test("createCommitLoop() puts 100 submits made during one commit into at most a few batches", async () => {
  const { calls, commit } = deferredCommit();
  const loop = createCommitLoop({ commit });
  const first = loop.submit("app:0", message(0, "first"));
  await tick();
  assert.equal(calls.length, 1);
  const rest = Array.from(
    { length: 100 },
    (_, i) => loop.submit(`app:${i % 5}`, message(i, `m${i}`)),
  );
  let released = 0;
  let settled = false;
  const all = Promise.all([first, ...rest]).then(() => void (settled = true));
  while (!settled) {
    await tick();
    for (const call of calls.slice(released)) call.release();
    released = calls.length;
  }
  await all;
  // One batch in flight, one with the 80 commands of free actors, one for app:0's 20.
  assert.ok(calls.length <= 3, `${calls.length} batches`);
  await loop.stop();
});

Deno.test("createCommitLoop() starts a batch next to one in flight only when it is big enough", async () => {
  const { calls, commit } = deferredCommit();
  const loop = createCommitLoop({ commit, minConcurrentBatch: 5, concurrentWaitMs: 60_000 });
  const first = loop.submit("app:0", message(0, "first"));
  await tick();
  assert.equal(calls.length, 1, "an idle loop starts at once");
  const rest = [loop.submit("app:1", message(1, "m0"))];
  for (let i = 1; i < 4; i++) {
    rest.push(loop.submit(`app:${i % 3 + 1}`, message(i % 3 + 1, `m${i}`)));
  }
  await tick();
  assert.equal(calls.length, 1, "four commands wait for the commit in flight");
  rest.push(loop.submit("app:0", message(0, "m4")));
  await tick();
  assert.equal(calls.length, 1, "app:0 is busy, so its command is not ready");
  rest.push(loop.submit("app:2", message(2, "m5")));
  await tick();
  assert.equal(calls.length, 2, "five ready commands start a second batch");
  assert.deepEqual(calls[1].batch, ["m0", "m3", "m1", "m5", "m2"]);
  calls[0].release();
  await first;
  await tick();
  assert.equal(calls.length, 2, "app:0's lone command waits while a batch is in flight");
  calls[1].release();
  await tick();
  assert.equal(calls.length, 3, "and goes once none is");
  assert.deepEqual(calls[2].batch, ["m4"]);
  calls[2].release();
  assert.ok((await Promise.all(rest)).every((result) => result.ok));
  await loop.stop();
});

Deno.test("createCommitLoop() starts a small batch after concurrentWaitMs next to a stuck one", async () => {
  const { calls, commit } = deferredCommit();
  const loop = createCommitLoop({ commit, concurrentWaitMs: 50 });
  const stuck = loop.submit("app:0", message(0, "stuck"));
  await tick();
  const started = performance.now();
  const lone = loop.submit("app:1", message(1, "lone"));
  await tick();
  assert.equal(calls.length, 1, "the lone command waits at first");
  while (calls.length < 2) await tick(5);
  const waited = performance.now() - started;
  assert.ok(waited >= 45 && waited < 1_000, `${waited} ms`);
  calls[1].release();
  assert.ok((await lone).ok);
  calls[0].release();
  assert.ok((await stuck).ok);
  await loop.stop();
});

Deno.test("createCommitLoop() never exceeds maxBatch and lets other actors in between", async () => {
  const batches: string[][] = [];
  const loop = createCommitLoop({
    maxBatch: 10,
    maxInFlight: 1,
    commit: async (commands) => {
      batches.push(commands.map(contentOf));
      await tick();
      return okAll(commands);
    },
  });
  const busy = Array.from({ length: 35 }, (_, i) => loop.submit("app:1", message(1, `a${i}`)));
  await tick();
  const other = loop.submit("app:2", message(2, "b0"));
  const results = await Promise.all([...busy, other]);
  assert.ok(results.every((result) => result.ok));
  assert.ok(batches.every((batch) => batch.length <= 10));
  assert.deepEqual(batches.flat().filter((c) => c.startsWith("a")), busy.map((_, i) => `a${i}`));
  const otherBatch = batches.findIndex((batch) => batch.includes("b0"));
  assert.ok(otherBatch <= 1, `b0 waited for ${otherBatch} batches`);
  await loop.stop();
});

Deno.test("createCommitLoop() ends an actor's part of a batch at a command that endsBatch names", async () => {
  const batches: string[][] = [];
  const loop = createCommitLoop({
    maxInFlight: 1,
    endsBatch: (command) => contentOf(command).startsWith("click"),
    commit: async (commands) => {
      batches.push(commands.map(contentOf));
      await tick();
      return okAll(commands);
    },
  });
  const first = loop.submit("app:1", message(1, "a0"));
  await tick(); // a0 commits alone; the rest queue behind it
  const rest = [
    loop.submit("app:1", message(1, "a1")),
    loop.submit("app:1", message(1, "click1")),
    loop.submit("app:1", message(1, "a2")),
    loop.submit("app:2", message(2, "b0")),
    loop.submit("app:2", message(2, "b1")),
  ];
  assert.ok((await Promise.all([first, ...rest])).every((result) => result.ok));
  // Other actors still share the batch; app:1's commands behind the click wait for the next one.
  assert.deepEqual(batches, [["a0"], ["b0", "b1", "a1", "click1"], ["a2"]]);
  await loop.stop();
});

Deno.test("createCommitLoop() retries a failed batch command by command so only the bad one fails", async () => {
  const batches: string[][] = [];
  const loop = createCommitLoop({
    commit: (commands) => {
      batches.push(commands.map(contentOf));
      if (commands.some((command) => contentOf(command) === "bad")) {
        return Promise.reject(new Error("Check constraint violated"));
      }
      return Promise.resolve(okAll(commands));
    },
  });
  let results: CommandResult[] = [];
  const printed = await capturingErrors(async () => {
    results = await Promise.all([
      loop.submit("app:1", message(1, "a1")),
      loop.submit("app:2", message(2, "bad")),
      loop.submit("app:1", message(1, "a2")),
      loop.submit("app:3", message(3, "c1")),
    ]);
  });
  assert.deepEqual(results, [
    { ok: true, value: "a1" },
    { ok: false, status: 500, message: "Internal server error" },
    { ok: true, value: "a2" },
    { ok: true, value: "c1" },
  ]);
  assert.deepEqual(batches, [["a1", "a2", "bad", "c1"], ["a1"], ["a2"], ["bad"], ["c1"]]);
  assert.equal(printed.length, 1);
  const line = JSON.parse(printed[0]);
  assert.equal(line.level, "error");
  assert.equal(line.cause.message, "Check constraint violated");
  assert.ok(!printed[0].includes("bad"), "the command is not logged");
  await loop.stop();
});

Deno.test("createCommitLoop() does not try again a batch whose commit may have taken effect", async () => {
  const batches: string[][] = [];
  const loop = createCommitLoop({
    commit: (commands) => {
      batches.push(commands.map(contentOf));
      if (commands.some((command) => contentOf(command) === "lost")) {
        return Promise.reject(new CommitOutcomeUnknown());
      }
      return Promise.resolve(okAll(commands));
    },
  });
  let results: CommandResult[] = [];
  const printed = await capturingErrors(async () => {
    results = await Promise.all([
      loop.submit("app:1", message(1, "a1")),
      loop.submit("app:2", message(2, "lost")),
    ]);
  });
  // Perhaps stored: answered as failed, retryably (a channel's stored request is idempotent).
  assert.deepEqual(results, [UNAVAILABLE, UNAVAILABLE]);
  assert.deepEqual(batches, [["a1", "lost"]], "no command was committed again");
  assert.equal(printed.length, 1);
  await loop.stop();
});

Deno.test("createCommitLoop() answers 500 when commit throws synchronously or returns too few results", async () => {
  let calls = 0;
  const loop = createCommitLoop({
    commit: (commands) => {
      calls++;
      if (contentOf(commands[0]) === "throw") throw new TypeError("Not a promise");
      return Promise.resolve(okAll(commands).slice(1));
    },
  });
  await capturingErrors(async () => {
    assert.deepEqual(await loop.submit("app:1", message(1, "throw")), {
      ok: false,
      status: 500,
      message: "Internal server error",
    });
    const results = await Promise.all([
      loop.submit("app:1", message(1, "x")),
      loop.submit("app:2", message(2, "y")),
    ]);
    assert.deepEqual(
      results,
      [INTERNAL_ERROR, INTERNAL_ERROR],
      "misaligned results are not trusted",
    );
  });
  assert.equal(calls, 3, "one batch and one lone retry for the throw, one batch for x and y");
  await loop.stop();
});

Deno.test("createCommitLoop() stop() refuses new commands and drains queued and in-flight ones", async () => {
  const { calls, commit } = deferredCommit();
  const loop = createCommitLoop({ commit, maxInFlight: 1 });
  const inFlight = loop.submit("app:1", message(1, "a"));
  await tick();
  const queued = loop.submit("app:1", message(1, "b"));
  let stopped = false;
  const stopping = loop.stop().then(() => void (stopped = true));
  assert.deepEqual(await loop.submit("app:2", message(2, "late")), {
    ok: false,
    status: 503,
    message: "Service is shutting down",
  });
  calls[0].release();
  assert.deepEqual(await inFlight, { ok: true, value: "a" });
  await tick();
  assert.equal(stopped, false, "b is still queued");
  calls[1].release();
  assert.deepEqual(await queued, { ok: true, value: "b" });
  await stopping;
  assert.equal(stopped, true);
  assert.equal(loop.actorCount, 0);
  assert.deepEqual(calls.map((call) => call.batch), [["a"], ["b"]]);
});

Deno.test("createCommitLoop() stops when its signal aborts", async () => {
  const controller = new AbortController();
  const loop = createCommitLoop({
    commit: (c) => Promise.resolve(okAll(c)),
    signal: controller.signal,
  });
  const pending = loop.submit("app:1", message(1, "a"));
  controller.abort();
  assert.equal((await loop.submit("app:1", message(1, "b"))).ok, false);
  assert.deepEqual(await pending, { ok: true, value: "a" });
  await loop.stop();
});

Deno.test("createCommitLoop() evicts actors idle with an empty mailbox", async () => {
  const loop = createCommitLoop({ commit: (c) => Promise.resolve(okAll(c)), idleMs: 20 });
  await Promise.all([1, 2, 3].map((i) => loop.submit(`app:${i}`, message(i, "x"))));
  assert.equal(loop.actorCount, 3);
  await tick(80);
  assert.equal(loop.actorCount, 0);
  assert.deepEqual(await loop.submit("app:1", message(1, "again")), { ok: true, value: "again" });
  assert.equal(loop.actorCount, 1);
  await loop.stop();
});

Deno.test("createCommitLoop() rejects bad options with a RangeError", () => {
  const commit = (c: AppCommand[]) => Promise.resolve(okAll(c));
  assert.throws(() => createCommitLoop({ commit, maxBatch: 0 }), RangeError);
  assert.throws(() => createCommitLoop({ commit, maxInFlight: 1.5 }), RangeError);
  assert.throws(() => createCommitLoop({ commit, minConcurrentBatch: 0 }), RangeError);
  assert.throws(() => createCommitLoop({ commit, concurrentWaitMs: -1 }), RangeError);
  assert.throws(() => createCommitLoop({ commit, idleMs: -1 }), RangeError);
});

Deno.test("createCommitLoop() answers a command failing alone with a retryable error as such", async () => {
  class Unreachable extends Error {}
  const loop = createCommitLoop({
    commit: (commands) => {
      const contents = commands.map(contentOf);
      if (contents.includes("unreachable")) return Promise.reject(new Unreachable("gone"));
      if (contents.includes("refused")) return Promise.reject(new Error("refused"));
      return Promise.resolve(okAll(commands));
    },
    isRetryable: (error) => error instanceof Unreachable,
  });
  await capturingErrors(async () => {
    const [unreachable, refused, fine] = await Promise.all([
      loop.submit("app:1", message(1, "unreachable")),
      loop.submit("app:2", message(2, "refused")),
      loop.submit("app:3", message(3, "fine")),
    ]);
    assert.deepEqual(unreachable, UNAVAILABLE);
    assert.deepEqual(unreachable, { ...INTERNAL_ERROR, retryable: true }, "clients see a 500");
    assert.deepEqual(refused, INTERNAL_ERROR);
    assert.deepEqual(fine, { ok: true, value: "fine" });
  });
  await loop.stop();
});

Deno.test("createCommitLoop() does not try a key's commands behind one that failed alone retryably", async () => {
  class Unreachable extends Error {}
  const tried: string[] = [];
  let down = true;
  const loop = createCommitLoop({
    commit: (commands) => {
      const contents = commands.map(contentOf);
      tried.push(contents.join("+"));
      if (down && contents.includes("a1")) {
        down = commands.length > 1; // the batch fails; a1 alone fails, then the database is back
        return Promise.reject(new Unreachable("gone"));
      }
      return Promise.resolve(okAll(commands));
    },
    isRetryable: (error) => error instanceof Unreachable,
  });
  await capturingErrors(async () => {
    const answers = await Promise.all([
      loop.submit("app:1", message(1, "a1")),
      loop.submit("app:2", message(2, "b1")),
      loop.submit("app:1", message(1, "a2")),
    ]);
    assert.deepEqual(answers, [UNAVAILABLE, { ok: true, value: "b1" }, UNAVAILABLE]);
  });
  // a2 was never tried alone: committed, it would have come before a1.
  assert.deepEqual(tried, ["a1+a2+b1", "a1", "b1"]);
  await loop.stop();
});

Deno.test("createCommitLoop() refuses a stream's commands handed over before its retryable failure", async () => {
  class Unreachable extends Error {}
  const tried: string[] = [];
  let release = () => {};
  let down = true;
  const loop = createCommitLoop({
    commit: async (commands) => {
      const contents = commands.map(contentOf);
      tried.push(contents.join("+"));
      if (contents.includes("d1") && down) {
        await new Promise<void>((resolve) => release = resolve);
        throw new Unreachable("gone");
      }
      return okAll(commands);
    },
    isRetryable: (error) => error instanceof Unreachable,
  });
  await capturingErrors(async () => {
    const first = loop.submit("app:1", delivery(1, 1));
    await tick();
    // Queued behind d1's batch: d2 of its stream and epoch, a visitor's message, another stream.
    const queued = Promise.all([
      loop.submit("app:1", delivery(2, 1)),
      loop.submit("app:1", message(1, "visitor")),
      loop.submit("app:1", delivery(3, 1, "slack:T1")),
    ]);
    release();
    await tick();
    release(); // d1 alone fails too
    assert.deepEqual(await first, UNAVAILABLE);
    const [second, visitor, other] = await queued;
    assert.deepEqual(second, UNAVAILABLE, "d2 would have been stored before d1");
    assert.deepEqual(visitor, { ok: true, value: "visitor" });
    assert.deepEqual(other, { ok: true, value: "d3" });
    // Handed over before the failure was known (same epoch): refused too, untried.
    assert.deepEqual(await loop.submit("app:1", delivery(4, 1)), UNAVAILABLE);
    down = false;
    // The retries come with a later epoch.
    assert.deepEqual(await loop.submit("app:1", delivery(1, 2)), { ok: true, value: "d1" });
    assert.deepEqual(await loop.submit("app:1", delivery(2, 2)), { ok: true, value: "d2" });
  });
  assert.deepEqual(tried, ["d1", "d1", "visitor+d3", "d1", "d2"]);
  await loop.stop();
});

Deno.test("createCommitLoop() fences a stream whose command a committed batch answered retryably", async () => {
  const tried: string[] = [];
  let release = () => {};
  const loop = createCommitLoop({
    commit: async (commands) => {
      const contents = commands.map(contentOf);
      tried.push(contents.join("+"));
      if (contents.includes("d1")) {
        await new Promise<void>((resolve) => release = resolve);
        // As a batch cut in segments answers when a later segment failed retryably alone.
        return commands.map((command) =>
          contentOf(command) === "d1" ? UNAVAILABLE : okAll([command])[0]
        );
      }
      return okAll(commands);
    },
  });
  const first = loop.submit("app:1", delivery(1, 5));
  await tick();
  const second = loop.submit("app:1", delivery(2, 5));
  release();
  assert.deepEqual(await first, UNAVAILABLE);
  assert.deepEqual(await second, UNAVAILABLE);
  assert.deepEqual(await loop.submit("app:1", delivery(2, 6)), { ok: true, value: "d2" });
  assert.deepEqual(tried, ["d1", "d2"]);
  await loop.stop();
});

Deno.test("createCommitLoop() does not fence a stream whose command failed for good", async () => {
  const loop = createCommitLoop({
    commit: (commands) =>
      commands.some((command) => contentOf(command) === "d1")
        ? Promise.reject(new Error("refused")) // not retryable: recovery counts the attempt
        : Promise.resolve(okAll(commands)),
    isRetryable: () => false,
  });
  await capturingErrors(async () => {
    assert.deepEqual(await loop.submit("app:1", delivery(1, 3)), INTERNAL_ERROR);
    assert.deepEqual(await loop.submit("app:1", delivery(2, 3)), { ok: true, value: "d2" });
  });
  await loop.stop();
});
