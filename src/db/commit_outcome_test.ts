import assert from "node:assert/strict";
import { commitVerdict } from "./commit_outcome.ts";

Deno.test("commitVerdict() takes only the transaction's own mark for a commit", () => {
  assert.equal(commitVerdict("900", "committed", "900"), "committed");
  // After a crash, a new transaction may commit under the lost one's id: without the mark, the
  // status proves nothing, and the look is repeated until its deadline.
  assert.equal(commitVerdict("900", "committed", "899"), "ask again");
  assert.equal(commitVerdict("900", "committed", null), "ask again");
});

Deno.test("commitVerdict() takes an aborted transaction as not committed, and waits for one in progress", () => {
  assert.equal(commitVerdict("900", "aborted", "899"), "aborted");
  assert.equal(commitVerdict("900", "aborted", null), "aborted");
  assert.equal(commitVerdict("900", "in progress", "899"), "ask again");
  assert.equal(commitVerdict("900", null, null), "ask again");
});
