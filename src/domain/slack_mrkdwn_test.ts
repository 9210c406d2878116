import assert from "node:assert/strict";
import { literalMarkers } from "./literal_markers.ts";
import {
  markdownToMrkdwn,
  splitMrkdwn,
  textToMrkdwn,
  truncateMrkdwn,
  truncatePlain,
} from "./slack_mrkdwn.ts";

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

/** Markdown converted to one mrkdwn text. */
function mrkdwnOf(markdown: string): string {
  return markdownToMrkdwn(markdown).map((segment) => segment.kind === "text" ? segment.text : "---")
    .join("\n");
}

Deno.test("markdownToMrkdwn() ends each span at its first closing marker, and converts ***both***", () => {
  assert.equal(mrkdwnOf("Press **Y** or **N**"), "Press *Y* or *N*");
  assert.equal(mrkdwnOf("**a**, **b**"), "*a*, *b*");
  assert.equal(mrkdwnOf("~~a~~ ~~b~~"), "~a~ ~b~");
  assert.equal(mrkdwnOf("__A__ or __B__"), "*A* or *B*");
  assert.equal(mrkdwnOf("**Name:** x **Age:** y"), "*Name:* x *Age:* y");
  assert.equal(mrkdwnOf("***both***"), "*_both_*");
  assert.equal(mrkdwnOf("*Note: **important** read*"), "_Note: *important* read_");
  assert.equal(mrkdwnOf("2 * 3 * 4"), "2 * 3 * 4");
  assert.equal(mrkdwnOf("snake_case_name"), "snake_case_name");
});

Deno.test("markdownToMrkdwn() takes backslash escapes as literal characters, formatting markers as look-alikes", () => {
  assert.equal(mrkdwnOf(String.raw`\*literal\*`), "\u2217literal\u2217");
  assert.equal(
    mrkdwnOf(String.raw`Use \*args and \*\*kwargs`),
    "Use \u2217args and \u2217\u2217kwargs",
  );
  assert.equal(mrkdwnOf(String.raw`use \<b\> tags`), "use &lt;b&gt; tags");
  assert.equal(mrkdwnOf(String.raw`1\. not a list`), "1. not a list");
  assert.equal(literalMarkers("*_~`x"), "\u2217\u02CD\u223C\u02CBx");
});

Deno.test("markdownToMrkdwn() links autolinks and keeps a label's emphasis around its link", () => {
  assert.equal(mrkdwnOf("Docs: <https://parley.io/docs>"), "Docs: <https://parley.io/docs>");
  assert.equal(mrkdwnOf("[**Docs**](https://parley.io)"), "*<https://parley.io|Docs>*");
  assert.equal(mrkdwnOf("[_Docs_](https://parley.io)"), "_<https://parley.io|Docs>_");
  assert.equal(mrkdwnOf("[Docs](https://parley.io)"), "<https://parley.io|Docs>");
  // Still no mention or disguised link from customer text.
  assert.equal(
    mrkdwnOf("<!channel> <@U1> <https://evil|click>"),
    // A Markdown autolink whose address is no URL: its text, never a link labelled "click".
    "&lt;!channel&gt; &lt;@U1&gt; https://evil|click",
  );
});

Deno.test("textToMrkdwn() keeps a bare URL's own closing bracket and markers, and leaves sentence punctuation out", () => {
  assert.equal(
    textToMrkdwn("See https://en.wikipedia.org/wiki/Mercury_(planet) now"),
    "See <https://en.wikipedia.org/wiki/Mercury_(planet)> now",
  );
  assert.equal(textToMrkdwn("(see https://x.io/a)."), "(see <https://x.io/a>).");
  assert.equal(
    textToMrkdwn("https://x.io/path_ and https://x.io/a~b~"),
    "<https://x.io/path_> and <https://x.io/a~b~>",
  );
  assert.equal(
    textToMrkdwn("Go to https://x.io/a?b=1, or not!"),
    "Go to <https://x.io/a?b=1>, or not!",
  );
});
