import assert from "node:assert/strict";
import { createMediaLinks, MEDIA_LINK_TTL_SECONDS } from "./media_links.ts";

const KEY = new Uint8Array(32).fill(7);

function queryOf(link: string) {
  return Object.fromEntries(new URL(link).searchParams);
}

Deno.test("createMediaLinks signs a link that verifies for its application and media only, for 24 hours", () => {
  let clock = 1_800_000_000_000;
  const links = createMediaLinks({
    encryptionKey: KEY,
    publicBaseUrl: "https://p.example",
    now: () => clock,
  });
  const link = links.link(42, "1234567890");
  assert.match(
    link,
    /^https:\/\/p\.example\/api\/v1\/whatsapp\/media\/1234567890\?exp=\d+&sig=[0-9a-f]{64}$/,
  );
  assert.equal(links.verify("1234567890", queryOf(link), [7, 42, 99]), 42);
  assert.equal(links.verify("1234567890", queryOf(link), [7, 99]), null, "another app's");
  assert.equal(links.verify("1234567890", queryOf(link), []), null);
  assert.equal(links.verify("999", queryOf(link), [42]), null);
  assert.equal(links.verify("1234567890", { ...queryOf(link), sig: "0".repeat(64) }, [42]), null);
  assert.equal(
    links.verify(
      "1234567890",
      { ...queryOf(link), exp: String(Number(queryOf(link).exp) + 1) },
      [42],
    ),
    null,
  );
  assert.equal(links.verify("1234567890", {}, [42]), null);
  clock += (MEDIA_LINK_TTL_SECONDS + 1) * 1000;
  assert.equal(links.verify("1234567890", queryOf(link), [42]), null);
});

Deno.test("createMediaLinks links of another key or another proxy do not verify", () => {
  const mine = createMediaLinks({ encryptionKey: KEY, publicBaseUrl: "http://x" });
  const theirs = createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" });
  const slack = createMediaLinks({
    encryptionKey: KEY,
    publicBaseUrl: "http://x",
    purpose: "slack",
  });
  assert.equal(mine.verify("m", queryOf(mine.link(1, "m")), [1]), 1);
  assert.equal(mine.verify("m", queryOf(theirs.link(1, "m")), [1]), null);
  assert.equal(mine.verify("m", queryOf(slack.link(1, "m")), [1]), null);
});
