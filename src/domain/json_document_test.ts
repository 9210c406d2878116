import assert from "node:assert/strict";
import {
  MAX_JSON_DEPTH,
  nestsDeeperThan,
  parseJsonBytes,
  parseJsonDocument,
  storableText,
} from "./json_document.ts";

Deno.test("parseJsonDocument takes JSON nested up to the limit and refuses deeper or broken text", () => {
  const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
  assert.deepEqual(parseJsonDocument('{"a":[1,{"b":null}]}'), {
    ok: true,
    value: { a: [1, { b: null }] },
  });
  assert.equal(parseJsonDocument(nested(MAX_JSON_DEPTH)).ok, true);
  assert.deepEqual(parseJsonDocument(nested(MAX_JSON_DEPTH + 1)), { ok: false, reason: "depth" });
  assert.deepEqual(parseJsonDocument(`{"a":${nested(5_000)}}`), { ok: false, reason: "depth" });
  const broken = parseJsonDocument("{");
  assert.equal(broken.ok === false && broken.reason, "syntax");
  assert.deepEqual(parseJsonDocument("7"), { ok: true, value: 7 });
});

Deno.test("parseJsonDocument replaces lone surrogates with U+FFFD and keeps pairs", () => {
  assert.deepEqual(parseJsonDocument(String.raw`{"t":"a\ud800b","\udc00k":["\ud83d\ude00"]}`), {
    ok: true,
    value: { t: "a\ufffdb", "\ufffdk": ["\u{1f600}"] },
  });
  // An escaped backslash before "u" is no escape at all.
  assert.deepEqual(parseJsonDocument(String.raw`["\\ud800"]`), { ok: true, value: ["\\ud800"] });
});

Deno.test("nestsDeeperThan counts arrays and objects, not scalars", () => {
  assert.equal(nestsDeeperThan("text", 0), false);
  assert.equal(nestsDeeperThan({ a: { b: [1] } }, 3), false);
  assert.equal(nestsDeeperThan({ a: { b: [1] } }, 2), true);
  assert.equal(nestsDeeperThan({ a: "x", b: [] }, 1), true);
});

Deno.test("storableText() makes NUL and lone surrogates U+FFFD and keeps the rest", () => {
  assert.equal(storableText("a\u0000b\ud800c\udc00"), "a\uFFFDb\uFFFDc\uFFFD");
  assert.equal(storableText("ok 😀 \u2028"), "ok 😀 \u2028");
});

Deno.test("bytes are parsed as JSON, or answer undefined when they are not JSON", () => {
  assert.deepEqual(parseJsonBytes(new TextEncoder().encode('{"a":[1,"é"]}')), { a: [1, "é"] });
  assert.equal(parseJsonBytes(new TextEncoder().encode("null")), null);
  assert.equal(parseJsonBytes(new TextEncoder().encode("{not json")), undefined);
});
