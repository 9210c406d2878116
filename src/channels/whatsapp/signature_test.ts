import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { isValidMetaSignature, metaSignature } from "./signature.ts";

const APP_SECRET = "6d2f1c0e9b8a7f6e5d4c3b2a19087f6e";
const encoder = new TextEncoder();

/** A body written the way Meta writes it: non-ASCII text as lowercase `\uXXXX` escapes. */
const META_BODY =
  String.raw`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398",` +
  String
    .raw`"changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":` +
  String.raw`"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":` +
  String
    .raw`"Ren\u00e9e"},"wa_id":"16505551234"}],"messages":[{"from":"16505551234","id":"wamid.1",` +
  String
    .raw`"timestamp":"1749416383","type":"text","text":{"body":"Caf\u00e9 \u00e0 l'\u00e9t\u00e9 ` +
  String.raw`\ud83d\ude00"}}]},"field":"messages"}]}]}`;

Deno.test("metaSignature() is sha256= and the lowercase hex HMAC-SHA256 of the bytes", () => {
  const raw = encoder.encode('{"object":"whatsapp_business_account","entry":[]}');
  const expected = createHmac("sha256", APP_SECRET).update(raw).digest("hex");
  assert.equal(metaSignature(raw, APP_SECRET), `sha256=${expected}`);
  assert.match(metaSignature(raw, APP_SECRET), /^sha256=[0-9a-f]{64}$/);
});

Deno.test("isValidMetaSignature() accepts the signature Meta sends", () => {
  const raw = encoder.encode(META_BODY);
  assert.equal(isValidMetaSignature(raw, metaSignature(raw, APP_SECRET), APP_SECRET), true);
});

Deno.test("isValidMetaSignature() rejects a signature made with another secret", () => {
  const raw = encoder.encode(META_BODY);
  assert.equal(isValidMetaSignature(raw, metaSignature(raw, "another secret"), APP_SECRET), false);
});

Deno.test("isValidMetaSignature() rejects a body changed after signing", () => {
  const raw = encoder.encode(META_BODY);
  const header = metaSignature(raw, APP_SECRET);
  assert.equal(isValidMetaSignature(encoder.encode(META_BODY + " "), header, APP_SECRET), false);
});

Deno.test("isValidMetaSignature() rejects a missing header", () => {
  const raw = encoder.encode(META_BODY);
  assert.equal(isValidMetaSignature(raw, null, APP_SECRET), false);
  assert.equal(isValidMetaSignature(raw, undefined, APP_SECRET), false);
  assert.equal(isValidMetaSignature(raw, "", APP_SECRET), false);
});

Deno.test("isValidMetaSignature() rejects malformed headers", () => {
  const raw = encoder.encode(META_BODY);
  const hex = metaSignature(raw, APP_SECRET).slice("sha256=".length);
  const sha1 = createHmac("sha1", APP_SECRET).update(raw).digest("hex");
  for (
    const header of [
      `sha1=${sha1}`, // the legacy X-Hub-Signature algorithm
      hex, // no prefix
      `sha256:${hex}`,
      `sha256=${hex.slice(1)}`, // odd number of hex digits
      `sha256=${hex.slice(2)}`, // too short
      `sha256=${hex}00`, // too long
      `sha256=${hex.slice(0, -1)}g`, // not hex
      `sha256= ${hex}`,
      `sha256=${hex},sha256=${hex}`,
    ]
  ) {
    assert.equal(isValidMetaSignature(raw, header, APP_SECRET), false, header);
  }
});

Deno.test("isValidMetaSignature() accepts uppercase hex digits", () => {
  const raw = encoder.encode(META_BODY);
  const hex = metaSignature(raw, APP_SECRET).slice("sha256=".length);
  assert.equal(isValidMetaSignature(raw, `sha256=${hex.toUpperCase()}`, APP_SECRET), true);
});

Deno.test("isValidMetaSignature() never accepts a signature when the app secret is empty", () => {
  const raw = encoder.encode(META_BODY);
  assert.equal(isValidMetaSignature(raw, metaSignature(raw, ""), ""), false);
});

Deno.test("isValidMetaSignature() checks the raw escaped bytes, not a re-serialization", () => {
  const raw = encoder.encode(META_BODY);
  assert.ok(META_BODY.includes(String.raw`Caf\u00e9`), "the body carries the escapes as ASCII");
  assert.ok(raw.every((byte) => byte < 0x80), "Meta's body is pure ASCII");
  const header = metaSignature(raw, APP_SECRET);
  assert.equal(isValidMetaSignature(raw, header, APP_SECRET), true);

  const parsed = JSON.parse(META_BODY);
  assert.equal(parsed.entry[0].changes[0].value.messages[0].text.body, "Café à l'été 😀");
  const reserialized = encoder.encode(JSON.stringify(parsed));
  assert.notDeepEqual(reserialized, raw);
  assert.equal(isValidMetaSignature(reserialized, header, APP_SECRET), false);
});
