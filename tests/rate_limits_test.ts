import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { addHits } from "../src/db/rate_limits.ts";

Deno.test("addHits() statements over the same buckets in opposite orders never deadlock", async () => {
  await using db = await createTestDatabase();
  const buckets = Array.from({ length: 40 }, (_, i) => `bucket-${String(i).padStart(2, "0")}`);
  const forward = buckets.map((bucket) => ({ bucket, n: 1 }));
  const backward = [...forward].reverse();
  for (let round = 0; round < 30; round++) {
    // Separate connections of the pool, so that the statements really overlap.
    const results = await Promise.all([
      addHits(db.sql, forward),
      addHits(db.sql, backward),
      addHits(db.sql, forward),
      addHits(db.sql, backward),
    ]);
    for (const counts of results) assert.equal(counts.length, buckets.length);
  }
  const rows = await db.sql<{ count: number }[]>`SELECT count FROM rate_limits`;
  const total = rows.reduce((sum, row) => sum + row.count, 0);
  // Windows are per wall-clock minute: a round may straddle two, the total never changes.
  assert.equal(total, 30 * 4 * buckets.length);
});
