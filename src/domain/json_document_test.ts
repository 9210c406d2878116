import assert from "node:assert/strict";
import {
  exactInteger,
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

Deno.test("exactInteger() judges a number by its text: an integer, one beyond the safe ones, or none", () => {
  for (
    const [source, expected] of [
      ["7", 7],
      ["-7", -7],
      ["7.0", 7],
      ["7e0", 7],
      ["1.50e1", 15],
      ["1200e-2", 12],
      ["0", 0],
      ["-0", 0],
      ["0.0e5", 0],
      ["9007199254740991", 9007199254740991],
      ["9007199254740993", Number.MAX_VALUE],
      ["1e400", Number.MAX_VALUE],
      ["-1e400", -Number.MAX_VALUE],
    ] as const
  ) {
    assert.equal(exactInteger(source), expected, source);
  }
  // A body-sized fraction is read in one pass: a lazy pattern took 33 s on 256 KiB, holding the
  // HTTP thread (the bound is a hang guard, thousands of times what it takes).
  const started = performance.now();
  assert.ok(Number.isNaN(exactInteger(`1.${"0".repeat(200_000)}1`)));
  assert.equal(exactInteger(`7.${"0".repeat(200_000)}`), 7);
  assert.ok(performance.now() - started < 5_000, "one pass over the number");
  for (
    const source of ["0.99999999999999999", "2.0000000000000001", "12e-1", "1e-400", "0.5", "x"]
  ) {
    assert.ok(Number.isNaN(exactInteger(source)), source);
  }
});

Deno.test("parseJsonDocument judges the numbers of integerKeys by their text, at any depth", () => {
  const integerKeys = new Set(["id"]);
  assert.deepEqual(
    parseJsonDocument('{"id":0.99999999999999999,"n":0.99999999999999999,"a":[{"id":1e400}]}', {
      integerKeys,
    }),
    { ok: true, value: { id: NaN, n: 1, a: [{ id: Number.MAX_VALUE }] } },
  );
  // Strings are left alone, and lone surrogates are still replaced.
  assert.deepEqual(parseJsonDocument(String.raw`{"id":"7","t":"\ud800"}`, { integerKeys }), {
    ok: true,
    value: { id: "7", t: "\ufffd" },
  });
});
