import assert from "node:assert/strict";
import fc from "fast-check";
import { formFieldBytes, parseFormUrlencoded } from "./form_urlencoded.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

Deno.test("parseFormUrlencoded() reads what URLSearchParams writes", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.string({ unit: "grapheme" }), fc.string({ unit: "grapheme" }))),
      (pairs) => {
        const body = new URLSearchParams(pairs).toString();
        assert.deepEqual(parseFormUrlencoded(bytes(body)), pairs);
      },
    ),
  );
});

Deno.test("parseFormUrlencoded() agrees with URLSearchParams on any body that makes UTF-8", () => {
  const alphabet = fc.constantFrom("a", "=", "&", "+", "%", "2", "F", "c", "3", "A", "9", "é", " ");
  fc.assert(
    fc.property(fc.array(alphabet, { maxLength: 40 }).map((parts) => parts.join("")), (text) => {
      const parsed = parseFormUrlencoded(bytes(text));
      const expected = [...new URLSearchParams(text)];
      if (parsed === null) {
        assert.ok(expected.some(([name, value]) => `${name}${value}`.includes("\ufffd")));
      } else {
        assert.deepEqual(parsed, expected);
      }
    }),
  );
});

Deno.test("parseFormUrlencoded() refuses escapes that make no UTF-8, and keeps a stray %", () => {
  assert.equal(parseFormUrlencoded(bytes("chat_id=1&content=%FF%FE")), null);
  assert.equal(parseFormUrlencoded(bytes("content=%C3")), null, "a sequence cut short");
  assert.equal(parseFormUrlencoded(new Uint8Array([0x61, 0x3d, 0xff])), null, "a raw byte");
  assert.deepEqual(parseFormUrlencoded(bytes("a=100%&b=%zz&c=%C3%A9+x")), [
    ["a", "100%"],
    ["b", "%zz"],
    ["c", "é x"],
  ]);
  assert.deepEqual(parseFormUrlencoded(bytes("&&a&=b&")), [["a", ""], ["", "b"]]);
  assert.deepEqual(parseFormUrlencoded(bytes("")), []);
});

const fieldBytes = (search: string, name: string) => {
  const value = formFieldBytes(search, name);
  return value === null ? null : [...value];
};

Deno.test("formFieldBytes() reads the bytes a parameter's escapes spell, UTF-8 or not", () => {
  assert.deepEqual(fieldBytes("?hub.challenge=%FF%FE", "hub.challenge"), [0xff, 0xfe]);
  assert.deepEqual(fieldBytes("a=1&hub.challenge=%C3%A9%FF", "hub.challenge"), [0xc3, 0xa9, 0xff]);
  assert.deepEqual(
    fieldBytes("c=a%2Bb+c%26d%00x", "c"),
    [..."a+b c&d\0x"].map((c) => c.charCodeAt(0)),
  );
  assert.deepEqual(fieldBytes("c=é", "c"), [0xc3, 0xa9]);
  assert.deepEqual(fieldBytes("c=%zz%4", "c"), [..."%zz%4"].map((c) => c.charCodeAt(0)));
  assert.deepEqual(fieldBytes("c=1234567890", "c"), [..."1234567890"].map((c) => c.charCodeAt(0)));
});

Deno.test("formFieldBytes() takes the first of repeated parameters, and names decoded", () => {
  assert.deepEqual(fieldBytes("c=1&c=2", "c"), [0x31]);
  assert.deepEqual(fieldBytes("hub%2Echallenge=7", "hub.challenge"), [0x37]);
  assert.deepEqual(fieldBytes("c", "c"), []);
  assert.deepEqual(fieldBytes("c=", "c"), []);
  assert.equal(fieldBytes("d=1", "c"), null);
  assert.equal(fieldBytes("", "c"), null);
});
