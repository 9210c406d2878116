import assert from "node:assert/strict";
import { splitMrkdwn, truncateMrkdwn, truncatePlain } from "./slack_mrkdwn.ts";

const FAMILY = "👨‍👩‍👧‍👦";
const FRANCE = "🇫🇷";

Deno.test("truncatePlain() and truncateMrkdwn() cut between graphemes, never inside an emoji", () => {
  const label = `Billed yearly ${FAMILY} and more`;
  // The family (11 UTF-16 units) straddles the cut: it goes whole.
  assert.equal(truncatePlain(label, 20), "Billed yearly…");
  assert.equal(truncateMrkdwn(label, 20), "Billed yearly…");
  assert.equal(truncatePlain(`ab${FRANCE}${FRANCE}`, 7), `ab${FRANCE}…`);
  assert.equal(truncatePlain(`ab${FRANCE}${FRANCE}`, 6), "ab…");
  // A letter with its accents is one grapheme.
  assert.equal(truncatePlain("cafe\u0301s!", 5), "caf…");
});

Deno.test("splitMrkdwn() splits a run of flags between flags", () => {
  const chunks = splitMrkdwn(`xx${FRANCE.repeat(1000)}`, 3000);
  assert.equal(chunks.join(""), `xx${FRANCE.repeat(1000)}`);
  for (const chunk of chunks) {
    assert.ok(chunk.length <= 3000);
    assert.equal(chunk.replace(/^xx/, "").replaceAll(FRANCE, ""), "", "whole flags only");
  }
});

Deno.test("truncatePlain() still cuts one grapheme longer than the limit, between code points", () => {
  const marks = `a${"\u0301".repeat(30)}`;
  const cut = truncatePlain(marks, 10);
  assert.equal(cut, `a${"\u0301".repeat(8)}…`);
});
