import assert from "node:assert/strict";
import { decodeChangeNotice, encodeChangeNotice } from "./change_notice.ts";

Deno.test("encodeChangeNotice sends a small notice whole", () => {
  const notice = { a: [1, 2], m: [5, 9] as [number, number], c: [[1, 3]] as [number, number][] };
  assert.deepEqual(encodeChangeNotice(notice).map(decodeChangeNotice), [notice]);
});

Deno.test("encodeChangeNotice splits a large notice under 8000 bytes, every part keeping w", () => {
  const chats = Array.from({ length: 1_500 }, (_, i): [number, number] => [i % 700, 1_000_000 + i]);
  const notice = {
    a: [...new Set(chats.map(([app]) => app))],
    m: [1, 2] as [number, number],
    c: chats,
    w: 1 as const,
  };
  const payloads = encodeChangeNotice(notice);
  assert.ok(payloads.length > 1);
  for (const payload of payloads) assert.ok(payload.length < 8_000, `${payload.length} bytes`);
  const parts = payloads.map((payload) => decodeChangeNotice(payload)!);
  assert.ok(parts.every((part) => part.w === 1));
  assert.deepEqual(parts.flatMap((part) => part.c ?? []), chats);
  assert.deepEqual(parts.flatMap((part) => part.m ?? []), [1, 2]);
});

Deno.test("decodeChangeNotice refuses what is not a notice", () => {
  assert.equal(decodeChangeNotice("{"), null);
  assert.equal(decodeChangeNotice('{"a":["x"]}'), null);
  assert.equal(decodeChangeNotice("null"), null);
});

Deno.test("encodeChangeNotice keeps every edit of a large notice, in parts under the limit", () => {
  const edits = Array.from(
    { length: 400 },
    (
      _,
      i,
    ): [number, number, number, 0 | 1] => [
      1 + (i % 3),
      10_000 + i,
      1_000_000 + i,
      (i % 2) as 0 | 1,
    ],
  );
  const chats = Array.from({ length: 900 }, (_, i): [number, number] => [1, 2_000_000 + i]);
  const payloads = encodeChangeNotice({ a: [1, 2, 3], c: chats, e: edits });
  for (const payload of payloads) assert.ok(payload.length < 8_000);
  const parts = payloads.map((payload) => decodeChangeNotice(payload)!);
  assert.deepEqual(parts.flatMap((part) => part.e ?? []), edits);
});
