import assert from "node:assert/strict";
import { type ActorPool, createActorPool, workerIndexFor } from "./pool.ts";
import type { AppCommand, CommandResult } from "./protocol.ts";
import type { FakeValue } from "../../tests/fixtures/fake_worker.ts";
import { capturingErrors } from "../../tests/support/console.ts";

const ECHO_WORKER = new URL("../../tests/fixtures/echo_worker.ts", import.meta.url);
const CRASHING_WORKER = new URL("../../tests/fixtures/crashing_worker.ts", import.meta.url);
const DATABASE_URL = "postgres://unused@localhost/unused";
const INTERNAL_ERROR = { ok: false, status: 500, message: "Internal server error" };

function message(content: string): AppCommand {
  return { kind: "visitor.message", appId: 1, clientId: 1, messageType: "text", content };
}

function valueOf(result: CommandResult): FakeValue {
  assert.ok(result.ok, `expected success, got ${JSON.stringify(result)}`);
  return result.value as FakeValue;
}

/** The first `count` keys `app:<n>` that route to worker `index` of `size`. */
function keysOn(index: number, size: number, count = 1): string[] {
  const keys: string[] = [];
  for (let n = 0; keys.length < count; n++) {
    if (workerIndexFor(`app:${n}`, size) === index) keys.push(`app:${n}`);
  }
  return keys;
}

async function withPool(
  options: {
    size: number;
    workerUrl: URL;
    askTimeoutMs?: number;
    stopTimeoutMs?: number;
    coalesceMs?: number;
  },
  body: (pool: ActorPool) => Promise<void>,
): Promise<void> {
  const pool = await createActorPool({ databaseUrl: DATABASE_URL, ...options });
  try {
    await body(pool);
  } finally {
    await pool.stop();
  }
}

Deno.test("workerIndexFor() is stable, in range and spreads keys evenly", () => {
  for (const size of [1, 2, 3, 8, 13]) {
    const counts = new Array(size).fill(0);
    for (let n = 0; n < 20_000; n++) {
      const index = workerIndexFor(`app:${n}`, size);
      assert.ok(Number.isInteger(index) && index >= 0 && index < size);
      assert.equal(workerIndexFor(`app:${n}`, size), index);
      counts[index]++;
    }
    const expected = 20_000 / size;
    for (const count of counts) {
      assert.ok(Math.abs(count - expected) < expected * 0.1, `size ${size}: ${counts}`);
    }
  }
  // FNV-1a 32-bit of "a" is 0xe40c292c.
  assert.equal(workerIndexFor("a", 2 ** 31), 0xe40c292c % 2 ** 31);
  assert.throws(() => workerIndexFor("app:1", 0), RangeError);
});

Deno.test("createActorPool() sends every ask for one key to the same worker", async () => {
  await withPool({ size: 4, workerUrl: ECHO_WORKER }, async (pool) => {
    const keys = Array.from({ length: 24 }, (_, n) => `app:${n}`);
    const first = await Promise.all(keys.map((key) => pool.ask(key, message(key))));
    const second = await Promise.all(keys.map((key) => pool.ask(key, message(key))));
    keys.forEach((key, n) => {
      assert.equal(valueOf(first[n]).workerIndex, workerIndexFor(key, 4));
      assert.deepEqual(valueOf(second[n]), valueOf(first[n]));
    });
    assert.equal(new Set(first.map((result) => valueOf(result).workerIndex)).size, 4);
  });
});

Deno.test("createActorPool() sends an idle worker's ask at once and a busy worker's asks together", async () => {
  await withPool({ size: 1, workerUrl: ECHO_WORKER, coalesceMs: 6_000 }, async (pool) => {
    const started = performance.now();
    assert.equal(valueOf(await pool.ask("app:1", message("idle"))).askedWith, 1);
    assert.ok(performance.now() - started < 1_000, "an idle worker's ask waited to coalesce");

    // Busy long enough for the five asks below however late their ticks come on a busy machine.
    const busy = pool.ask("app:1", message("delay:1000"));
    const later: Promise<CommandResult>[] = [];
    for (let n = 0; n < 5; n++) {
      await new Promise((resolve) => setTimeout(resolve, 10)); // separate ticks
      later.push(pool.ask(`app:${n + 2}`, message(`later ${n}`)));
    }
    const answered = await Promise.all(later);
    // One message carried all five, sent when the busy commit answered, not after coalesceMs.
    assert.deepEqual(answered.map((result) => valueOf(result).askedWith), [5, 5, 5, 5, 5]);
    assert.equal(valueOf(await busy).content, "delay:1000");
    assert.ok(performance.now() - started < 4_000, "the asks waited for coalesceMs");
  });
});

Deno.test("createActorPool() fails only the ask that cannot be sent, not those sent with it", async () => {
  await withPool({ size: 1, workerUrl: ECHO_WORKER }, async (pool) => {
    // Asked in one tick, the three go to the worker in one message; a function cannot be cloned.
    const uncloneable = { ...message("bad"), payload: () => {} } as unknown as AppCommand;
    let results: CommandResult[] = [];
    const printed = await capturingErrors(async () => {
      results = await Promise.all([
        pool.ask("app:1", message("before")),
        pool.ask("app:2", uncloneable),
        pool.ask("app:3", message("after")),
      ]);
    });
    const [before, bad, after] = results;
    assert.equal(valueOf(before).content, "before");
    assert.deepEqual(bad, INTERNAL_ERROR);
    assert.equal(valueOf(after).content, "after");
    assert.equal(printed.length, 1, printed.join("\n"));
  });
});

Deno.test("createActorPool() sends a busy worker's asks after coalesceMs without an answer", async () => {
  await withPool({ size: 1, workerUrl: ECHO_WORKER, coalesceMs: 20 }, async (pool) => {
    const busy = pool.ask("app:1", message("delay:3000"));
    await new Promise((resolve) => setTimeout(resolve, 10));
    const started = performance.now();
    const [first, second] = await Promise.all([
      pool.ask("app:2", message("a")),
      pool.ask("app:3", message("b")),
    ]);
    // They did not wait for the 3 s commit: the timer sent them, together.
    assert.ok(performance.now() - started < 2_000, "the asks waited for the busy commit");
    assert.equal(valueOf(first).askedWith, 2);
    assert.equal(valueOf(second).askedWith, 2);
    await busy;
  });
});

Deno.test("createActorPool() fails a crashed worker's asks with 500 at once and replaces it", async () => {
  const [crashKey, hangKey] = keysOn(0, 2, 2);
  const [otherKey] = keysOn(1, 2);
  const printed = await capturingErrors(async () => {
    await withPool({ size: 2, workerUrl: CRASHING_WORKER }, async (pool) => {
      const before = valueOf(await pool.ask(crashKey, message("warm up")));
      const started = performance.now();
      const crashed = pool.ask(crashKey, message("crash"));
      const waiting = pool.ask(hangKey, message("delay:60000"));
      const elsewhere = pool.ask(otherKey, message("delay:300"));
      // Not retryable: the command may be what killed the worker.
      assert.deepEqual(await crashed, INTERNAL_ERROR);
      assert.deepEqual(await waiting, INTERNAL_ERROR);
      assert.ok(performance.now() - started < 2_000, "pending asks fail fast, not on timeout");
      assert.equal(valueOf(await elsewhere).workerIndex, 1, "the other worker is untouched");

      const after = valueOf(await pool.ask(crashKey, message("again")));
      assert.equal(after.workerIndex, 0);
      assert.notEqual(after.incarnation, before.incarnation, "a replacement answered");
      assert.equal(valueOf(await pool.ask(hangKey, message("too"))).incarnation, after.incarnation);
    });
  });
  assert.equal(JSON.parse(printed[0]).msg, "Actor worker crashed");
});

Deno.test("createActorPool() answers a worker's asks as retryable when it says its transaction was lost", async () => {
  const [stuckKey, otherKey] = keysOn(0, 2, 2);
  await capturingErrors(async () => {
    await withPool({ size: 2, workerUrl: CRASHING_WORKER }, async (pool) => {
      const stuck = pool.ask(stuckKey, message("stuck"));
      const waiting = pool.ask(otherKey, message("delay:60000"));
      const unavailable = { ...INTERNAL_ERROR, retryable: true };
      assert.deepEqual(await stuck, unavailable);
      assert.deepEqual(await waiting, unavailable, "none of its commands is to blame");
      assert.ok(valueOf(await pool.ask(stuckKey, message("again"))), "replaced");
    });
  });
});

Deno.test("createActorPool() answers 500 to an ask that exceeds askTimeoutMs", async () => {
  await withPool(
    { size: 1, workerUrl: ECHO_WORKER, askTimeoutMs: 1_000, stopTimeoutMs: 200 },
    async (pool) => {
      const started = performance.now();
      assert.deepEqual(await pool.ask("app:1", message("hang")), INTERNAL_ERROR);
      const elapsed = performance.now() - started;
      assert.ok(elapsed >= 1_000 && elapsed < 5_000, `${elapsed} ms`);
      assert.ok(valueOf(await pool.ask("app:2", message("fine"))));
    },
  );
});

Deno.test("createActorPool() runs keys of different workers in parallel", async () => {
  await withPool({ size: 2, workerUrl: ECHO_WORKER }, async (pool) => {
    const [left] = keysOn(0, 2);
    const [right] = keysOn(1, 2);
    await Promise.all([pool.ask(left, message("warm")), pool.ask(right, message("warm"))]);
    const started = performance.now();
    const results = await Promise.all([
      pool.ask(left, message("delay:1000")),
      pool.ask(right, message("delay:1000")),
    ]);
    const elapsed = performance.now() - started;
    assert.deepEqual(results.map((result) => valueOf(result).workerIndex), [0, 1]);
    // One after the other would take 2 s.
    assert.ok(elapsed >= 990 && elapsed < 1_800, `${elapsed} ms`);
  });
});

Deno.test("createActorPool() stop() drains asks already sent, then refuses new ones", async () => {
  const pool = await createActorPool({
    size: 2,
    databaseUrl: DATABASE_URL,
    workerUrl: ECHO_WORKER,
  });
  const inFlight = pool.ask("app:1", message("delay:100"));
  const stopped = pool.stop();
  assert.deepEqual(await pool.ask("app:1", message("late")), {
    ok: false,
    status: 503,
    message: "Service is shutting down",
  });
  assert.equal(valueOf(await inFlight).content, "delay:100");
  await stopped;
  assert.equal(pool.stop(), stopped, "stopping twice is one stop");
});

Deno.test("createActorPool() rejects when a worker cannot start", async () => {
  const missing = new URL("../../tests/fixtures/missing_worker.ts", import.meta.url);
  await capturingErrors(async () => {
    await assert.rejects(
      () => createActorPool({ size: 2, databaseUrl: DATABASE_URL, workerUrl: missing }),
      /Cannot start actor worker/,
    );
  });
  await assert.rejects(
    () => createActorPool({ size: 0, databaseUrl: DATABASE_URL, workerUrl: ECHO_WORKER }),
    RangeError,
  );
});
