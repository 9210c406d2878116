import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createSecretBox } from "./secret_box.ts";

const KEY = new Uint8Array(32).map((_, i) => i);

Deno.test("createSecretBox() seals to v1:<iv>:<ciphertext> and opens it again", () => {
  const box = createSecretBox(KEY);
  const sealed = box.seal("whsec_secret ünïcode");
  assert.match(sealed, /^v1:[A-Za-z0-9+/]{16}:[A-Za-z0-9+/=]+$/);
  assert.ok(!sealed.includes("whsec_"));
  assert.equal(box.open(sealed), "whsec_secret ünïcode");
  assert.notEqual(box.seal("same"), box.seal("same"), "a fresh IV each time");
});

Deno.test("createSecretBox() refuses a value sealed with another key or tampered with", () => {
  const sealed = createSecretBox(KEY).seal("secret");
  const other = createSecretBox(new Uint8Array(32).fill(7));
  assert.throws(() => other.open(sealed));
  const [v, iv, body] = sealed.split(":");
  const flipped = Buffer.from(body, "base64");
  flipped[0] ^= 1;
  assert.throws(() => createSecretBox(KEY).open(`${v}:${iv}:${flipped.toString("base64")}`));
  assert.throws(() => createSecretBox(KEY).open("plain text"), TypeError);
  assert.throws(() => createSecretBox(new Uint8Array(16)), RangeError);
});
