import assert from "node:assert/strict";
import { queryParamBytes } from "./query_bytes.ts";

const bytes = (search: string, name: string) => {
  const value = queryParamBytes(search, name);
  return value === null ? null : [...value];
};

Deno.test("queryParamBytes() reads the bytes a parameter's escapes spell, UTF-8 or not", () => {
  assert.deepEqual(bytes("?hub.challenge=%FF%FE", "hub.challenge"), [0xff, 0xfe]);
  assert.deepEqual(bytes("a=1&hub.challenge=%C3%A9%FF", "hub.challenge"), [0xc3, 0xa9, 0xff]);
  assert.deepEqual(bytes("c=a%2Bb+c%26d%00x", "c"), [..."a+b c&d\0x"].map((c) => c.charCodeAt(0)));
  assert.deepEqual(bytes("c=é", "c"), [0xc3, 0xa9]);
  assert.deepEqual(bytes("c=%zz%4", "c"), [..."%zz%4"].map((c) => c.charCodeAt(0)));
  assert.deepEqual(bytes("c=1234567890", "c"), [..."1234567890"].map((c) => c.charCodeAt(0)));
});

Deno.test("queryParamBytes() takes the first of repeated parameters, and names decoded", () => {
  assert.deepEqual(bytes("c=1&c=2", "c"), [0x31]);
  assert.deepEqual(bytes("hub%2Echallenge=7", "hub.challenge"), [0x37]);
  assert.deepEqual(bytes("c", "c"), []);
  assert.deepEqual(bytes("c=", "c"), []);
  assert.equal(bytes("d=1", "c"), null);
  assert.equal(bytes("", "c"), null);
});
