import assert from "node:assert/strict";
import { createMediaLinks, MEDIA_LINK_TTL_SECONDS } from "./media_links.ts";

const KEY = new Uint8Array(32).fill(7);

function queryOf(link: string) {
  return Object.fromEntries(new URL(link).searchParams);
}

Deno.test("createMediaLinks signs a link that verifies for its application and media only", () => {
  let clock = 1_800_000_000_000;
  const links = createMediaLinks({
    encryptionKey: KEY,
    publicBaseUrl: "https://p.example",
    now: () => clock,
  });
  const link = links.link(7, "1234567890");
  assert.ok(link.startsWith("https://p.example/api/v1/whatsapp/media/1234567890?app=7&expires="));
  assert.equal(links.verify("1234567890", queryOf(link)), 7);
  assert.equal(links.verify("999", queryOf(link)), null);
  assert.equal(links.verify("1234567890", { ...queryOf(link), app: "8" }), null);
  assert.equal(links.verify("1234567890", { ...queryOf(link), signature: "0".repeat(64) }), null);
  assert.equal(links.verify("1234567890", {}), null);
  clock += (MEDIA_LINK_TTL_SECONDS + 1) * 1000;
  assert.equal(links.verify("1234567890", queryOf(link)), null);
});

Deno.test("createMediaLinks links made with another key do not verify", () => {
  const mine = createMediaLinks({ encryptionKey: KEY, publicBaseUrl: "http://x" });
  const theirs = createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" });
  assert.equal(mine.verify("m", queryOf(theirs.link(1, "m"))), null);
});
