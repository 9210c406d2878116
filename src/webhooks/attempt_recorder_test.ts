import assert from "node:assert/strict";
import { createAttemptRecorder } from "./attempt_recorder.ts";
import type { RecordedAttempt } from "../db/deliveries.ts";

function attempt(id: number): RecordedAttempt {
  return {
    delivery: { appId: 1, id, claimedUntil: "2026-11-22T00:00:00.000000Z" },
    attempt: { statusCode: 200, latencyMs: 1, error: null, responseExcerpt: "" },
    outcome: { state: "succeeded" },
  };
}

Deno.test("createAttemptRecorder() writes attempts that arrive during a write together", async () => {
  const writes: number[][] = [];
  let release!: () => void;
  const recorder = createAttemptRecorder(async (records) => {
    writes.push(records.map((r) => r.delivery.id));
    if (writes.length === 1) await new Promise<void>((resolve) => release = resolve);
  });
  const first = recorder.record(attempt(1));
  await new Promise((resolve) => setTimeout(resolve, 1));
  const rest = [2, 3, 4].map((id) => recorder.record(attempt(id)));
  release();
  await Promise.all([first, ...rest]);
  assert.deepEqual(writes, [[1], [2, 3, 4]]);
});

Deno.test("createAttemptRecorder() writes a failed batch one by one, so one bad record fails alone", async () => {
  const written: number[][] = [];
  let release!: () => void;
  const recorder = createAttemptRecorder(async (records) => {
    if (written.length === 0) {
      written.push([]);
      await new Promise<void>((resolve) => release = resolve);
      return;
    }
    if (records.some((r) => r.delivery.id === 13)) throw new Error("bad record");
    written.push(records.map((r) => r.delivery.id));
  });
  const first = recorder.record(attempt(1));
  await new Promise((resolve) => setTimeout(resolve, 1));
  const results = Promise.allSettled([12, 13, 14].map((id) => recorder.record(attempt(id))));
  release();
  await first;
  const settled = await results;
  assert.deepEqual(settled.map((r) => r.status), ["fulfilled", "rejected", "fulfilled"]);
  assert.deepEqual(written.slice(1), [[12], [14]]);
});

Deno.test("createAttemptRecorder() rejects the attempts of a failed write and goes on", async () => {
  let fail = true;
  const recorder = createAttemptRecorder((records) => {
    if (fail) return Promise.reject(new Error("database away"));
    assert.equal(records.length, 1);
    return Promise.resolve();
  });
  await assert.rejects(recorder.record(attempt(1)), /database away/);
  fail = false;
  await recorder.record(attempt(2));
});
