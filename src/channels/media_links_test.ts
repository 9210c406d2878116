import assert from "node:assert/strict";
import { createMediaLinks, MEDIA_LINK_TTL_SECONDS } from "./media_links.ts";

const KEY = new Uint8Array(32).fill(7);

/** The applications that received the media, as the proxy would look them up. */
const apps = (ids: number[]) => () => Promise.resolve(ids);

function queryOf(link: string) {
  return Object.fromEntries(new URL(link).searchParams);
}

Deno.test("createMediaLinks signs a link that verifies for its application and media only, for 24 hours", async () => {
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
  assert.equal(await links.verify("1234567890", queryOf(link), apps([7, 42, 99])), 42);
  assert.equal(
    await links.verify("1234567890", queryOf(link), apps([7, 99])),
    null,
    "another app's",
  );
  assert.equal(await links.verify("1234567890", queryOf(link), apps([])), null);
  assert.equal(await links.verify("999", queryOf(link), apps([42])), null);
  assert.equal(
    await links.verify("1234567890", { ...queryOf(link), sig: "0".repeat(64) }, apps([42])),
    null,
  );
  assert.equal(
    await links.verify(
      "1234567890",
      { ...queryOf(link), exp: String(Number(queryOf(link).exp) + 1) },
      apps([42]),
    ),
    null,
  );
  assert.equal(await links.verify("1234567890", {}, apps([42])), null);
  clock += (MEDIA_LINK_TTL_SECONDS + 1) * 1000;
  assert.equal(await links.verify("1234567890", queryOf(link), apps([42])), null);
  // A malformed or expired link is refused without looking the applications up.
  let lookups = 0;
  const counted = () => {
    lookups++;
    return Promise.resolve([42]);
  };
  assert.equal(await links.verify("1234567890", queryOf(link), counted), null);
  assert.equal(await links.verify("1234567890", { exp: "x", sig: "y" }, counted), null);
  assert.equal(lookups, 0);
});

Deno.test("createMediaLinks links of another key or another proxy do not verify", async () => {
  const mine = createMediaLinks({ encryptionKey: KEY, publicBaseUrl: "http://x" });
  const theirs = createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" });
  const slack = createMediaLinks({
    encryptionKey: KEY,
    publicBaseUrl: "http://x",
    purpose: "slack",
  });
  assert.equal(await mine.verify("m", queryOf(mine.link(1, "m")), apps([1])), 1);
  assert.equal(await mine.verify("m", queryOf(theirs.link(1, "m")), apps([1])), null);
  assert.equal(await mine.verify("m", queryOf(slack.link(1, "m")), apps([1])), null);
});

Deno.test("createMediaLinks refuses a media id no platform makes without looking it up", async () => {
  const links = createMediaLinks({ encryptionKey: KEY, publicBaseUrl: "http://x" });
  let lookups = 0;
  const counted = () => {
    lookups++;
    return Promise.resolve([1]);
  };
  for (const id of ["", "a\0b", "9".repeat(1_025)]) {
    assert.equal(await links.verify(id, queryOf(links.link(1, id)), counted), null);
  }
  assert.equal(lookups, 0);
  assert.equal(
    await links.verify("9".repeat(1_024), queryOf(links.link(1, "9".repeat(1_024))), counted),
    1,
  );
});
