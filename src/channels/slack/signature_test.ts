import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { isValidSlackRequest, slackSignature } from "./signature.ts";

const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW_MS = 1_795_000_000_123;
const NOW = String(Math.floor(NOW_MS / 1000));
const BODY = new TextEncoder().encode(
  '{"type":"event_callback","team_id":"T0123","event":{"type":"message","text":"Olá \\u00e9"}}',
);

/** The headers Slack would send with `raw` at `timestamp`. */
function signed(raw: Uint8Array, timestamp: string, secret = SECRET) {
  return { timestamp, signature: slackSignature(raw, timestamp, secret) };
}

Deno.test("slackSignature() is v0= and the hex HMAC-SHA256 of v0:timestamp:body", () => {
  const expected = createHmac("sha256", SECRET)
    .update(`v0:${NOW}:${new TextDecoder().decode(BODY)}`)
    .digest("hex");
  assert.equal(slackSignature(BODY, NOW, SECRET), `v0=${expected}`);
  assert.match(slackSignature(BODY, NOW, SECRET), /^v0=[0-9a-f]{64}$/);
});

Deno.test("isValidSlackRequest() accepts Slack's signature over the raw bytes", () => {
  assert.equal(isValidSlackRequest(BODY, signed(BODY, NOW), SECRET, NOW_MS), true);
  const upper = signed(BODY, NOW);
  upper.signature = `v0=${upper.signature.slice(3).toUpperCase()}`;
  assert.equal(isValidSlackRequest(BODY, upper, SECRET, NOW_MS), true, "hex in any case");
});

Deno.test("isValidSlackRequest() refuses a signature made with another secret", () => {
  assert.equal(isValidSlackRequest(BODY, signed(BODY, NOW, "other"), SECRET, NOW_MS), false);
});

Deno.test("isValidSlackRequest() refuses a body changed by one byte", () => {
  const changed = BODY.slice();
  changed[changed.length - 3] ^= 1;
  assert.equal(isValidSlackRequest(changed, signed(BODY, NOW), SECRET, NOW_MS), false);
  const reencoded = new TextEncoder().encode(
    JSON.stringify(JSON.parse(new TextDecoder().decode(BODY))),
  );
  assert.equal(
    isValidSlackRequest(reencoded, signed(BODY, NOW), SECRET, NOW_MS),
    false,
    "a re-serialized body is not the raw body",
  );
});

Deno.test("isValidSlackRequest() refuses a request 6 minutes old or 6 minutes ahead", () => {
  const old = String(Number(NOW) - 6 * 60);
  const ahead = String(Number(NOW) + 6 * 60);
  assert.equal(isValidSlackRequest(BODY, signed(BODY, old), SECRET, NOW_MS), false);
  assert.equal(isValidSlackRequest(BODY, signed(BODY, ahead), SECRET, NOW_MS), false);
});

Deno.test("isValidSlackRequest() accepts a request 4:59 old or ahead", () => {
  const old = String(Number(NOW) - (4 * 60 + 59));
  const ahead = String(Number(NOW) + (4 * 60 + 59));
  assert.equal(isValidSlackRequest(BODY, signed(BODY, old), SECRET, NOW_MS), true);
  assert.equal(isValidSlackRequest(BODY, signed(BODY, ahead), SECRET, NOW_MS), true);
});

Deno.test("isValidSlackRequest() refuses missing headers", () => {
  const { timestamp, signature } = signed(BODY, NOW);
  for (
    const headers of [
      { timestamp: null, signature },
      { timestamp: undefined, signature },
      { timestamp, signature: null },
      { timestamp, signature: undefined },
      { timestamp: "", signature },
      { timestamp, signature: "" },
    ]
  ) {
    assert.equal(
      isValidSlackRequest(BODY, headers, SECRET, NOW_MS),
      false,
      JSON.stringify(headers),
    );
  }
});

Deno.test("isValidSlackRequest() refuses a non-numeric or malformed timestamp or signature", () => {
  for (const timestamp of ["abc", `${NOW}.5`, `+${NOW}`, `${NOW}e0`, ` ${NOW}`, "-1"]) {
    const headers = signed(BODY, timestamp);
    assert.equal(isValidSlackRequest(BODY, headers, SECRET, NOW_MS), false, timestamp);
  }
  const { signature } = signed(BODY, NOW);
  for (
    const bad of [
      signature.slice(3),
      `v1=${signature.slice(3)}`,
      signature.slice(0, -1),
      `${signature}00`,
      `${signature.slice(0, -1)}g`,
    ]
  ) {
    assert.equal(
      isValidSlackRequest(BODY, { timestamp: NOW, signature: bad }, SECRET, NOW_MS),
      false,
      bad,
    );
  }
});

Deno.test("isValidSlackRequest() refuses everything without a signing secret", () => {
  assert.equal(isValidSlackRequest(BODY, signed(BODY, NOW, ""), null, NOW_MS), false);
  assert.equal(isValidSlackRequest(BODY, signed(BODY, NOW, ""), "", NOW_MS), false);
  assert.equal(isValidSlackRequest(BODY, signed(BODY, NOW), null, NOW_MS), false);
});

Deno.test("isValidSlackRequest() checks against the current time by default", () => {
  const now = String(Math.floor(Date.now() / 1000));
  assert.equal(isValidSlackRequest(BODY, signed(BODY, now), SECRET), true);
  assert.equal(isValidSlackRequest(BODY, signed(BODY, NOW), SECRET), false);
});
