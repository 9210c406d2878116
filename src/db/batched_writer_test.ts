import assert from "node:assert/strict";
import { createBatchedWriter } from "./batched_writer.ts";

Deno.test("createBatchedWriter writes rows that arrive during a write together, answering each", async () => {
  const statements: number[][] = [];
  const write = createBatchedWriter<number, number>(async (rows) => {
    statements.push(rows);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return rows.map((row) => row * 10);
  });
  const results = await Promise.all([1, 2, 3, 4].map((row) => write(row)));
  assert.deepEqual(results, [10, 20, 30, 40]);
  assert.deepEqual(statements, [[1], [2, 3, 4]]);
});

Deno.test("createBatchedWriter fails only the batch whose statement failed", async () => {
  let calls = 0;
  const write = createBatchedWriter<string, string>((rows) => {
    calls++;
    return calls === 1 ? Promise.reject(new Error("down")) : Promise.resolve(rows);
  });
  const first = write("a");
  const second = write("b");
  await assert.rejects(first, /down/);
  assert.equal(await second, "b");
  assert.equal(await write("c"), "c");
});

Deno.test("createBatchedWriter lingers for company when nothing is in flight, not when full", async () => {
  const statements: number[][] = [];
  const write = createBatchedWriter<number, number>((rows) => {
    statements.push(rows);
    return Promise.resolve(rows);
  }, { lingerMs: 500, maxRows: 3 });
  const first = write(1);
  await new Promise((resolve) => setTimeout(resolve, 5));
  // Still lingering: the second row joins the first's statement.
  assert.deepEqual(statements, []);
  const second = write(2);
  assert.deepEqual(await Promise.all([first, second]), [1, 2]);
  assert.deepEqual(statements, [[1, 2]]);
  // A full batch goes at once (well before the linger ends), the row left over right after it,
  // and a statement never exceeds maxRows.
  const full = [3, 4, 5, 6].map((row) => write(row));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(statements, [[1, 2], [3, 4, 5], [6]]);
  assert.deepEqual(await Promise.all(full), [3, 4, 5, 6]);
});
