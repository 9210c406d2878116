import assert from "node:assert/strict";
import { MAX_AD_REFERRAL_FIELD, readAdReferral, renderAdReferralLine } from "./ad_referral.ts";

/** Meta's documented `referral` of a message sent from a Click-to-WhatsApp ad. */
const META_REFERRAL = {
  source_url: "https://fb.me/2ZulEu42P",
  source_id: "120226305854810726",
  source_type: "ad",
  headline: "Chat with us",
  body: "Summer sale: 20% off all shoes",
  media_type: "image",
  image_url: "https://scontent.xx.fbcdn.net/v/t45.1600-4/ad.png",
  ctwa_clid:
    "ARAkLkA8rmlFeiCktEJQ-QTwRiyYHAFDLMNDBH0CD3qpjd0HR4irJ6LEkR7JwFF4XvnO2E4Nx0-eM-GABDLOPaOdRMv-_zfUQ2a",
};

Deno.test("readAdReferral keeps Meta's known fields and drops the rest", () => {
  const read = readAdReferral({ ...META_REFERRAL, welcome_message: { text: "Hi" }, extra: 1 });
  assert.deepEqual(read, META_REFERRAL);
});

Deno.test("readAdReferral is null for anything without a known non-blank field", () => {
  for (const raw of [undefined, null, "ad", [META_REFERRAL], {}, { headline: "  " }, { x: "y" }]) {
    assert.equal(readAdReferral(raw), null, JSON.stringify(raw));
  }
  assert.deepEqual(readAdReferral({ headline: 7, body: "Sale" }), { body: "Sale" });
});

Deno.test("readAdReferral cuts long fields and makes text storable", () => {
  const read = readAdReferral({
    body: "x".repeat(MAX_AD_REFERRAL_FIELD + 50),
    headline: "a\u0000b\ud800",
  });
  assert.equal(read?.body?.length, MAX_AD_REFERRAL_FIELD);
  assert.ok(read?.body?.endsWith("…"));
  assert.equal(read?.headline, "a\uFFFDb\uFFFD");
});

Deno.test("renderAdReferralLine links the ad's headline", () => {
  assert.equal(
    renderAdReferralLine(META_REFERRAL),
    "📣 From an ad: <https://fb.me/2ZulEu42P|“Chat with us”>",
  );
  assert.equal(
    renderAdReferralLine({
      source_type: "post",
      body: "New\n  collection",
      source_url: "https://fb.me/p",
    }),
    "📣 From a post: <https://fb.me/p|“New collection”>",
  );
  assert.equal(
    renderAdReferralLine({ source_url: "https://fb.me/p" }),
    "📣 From an ad: <https://fb.me/p>",
  );
  assert.equal(renderAdReferralLine({ ctwa_clid: "abc" }), "📣 From an ad");
});

Deno.test("renderAdReferralLine escapes what the ad says and links only safe URLs", () => {
  assert.equal(
    renderAdReferralLine({ headline: "<!channel> & <@U1>" }),
    "📣 From an ad: “&lt;!channel&gt; &amp; &lt;@U1&gt;”",
  );
  assert.equal(
    renderAdReferralLine({ headline: "Go", source_url: "javascript:alert(1)" }),
    "📣 From an ad: “Go” (javascript:alert(1))",
  );
  assert.equal(
    renderAdReferralLine({ headline: "Go", source_url: "https://fb.me/a|b>c" }),
    "📣 From an ad: <https://fb.me/a%7Cb%3Ec|“Go”>",
  );
  // A link too long to show whole is left out; the headline stays.
  assert.equal(
    renderAdReferralLine({ headline: "Go", source_url: `https://fb.me/${"a".repeat(600)}` }),
    "📣 From an ad: “Go”",
  );
  const long = renderAdReferralLine({ headline: "y".repeat(500), source_url: "https://fb.me/p" });
  assert.ok(long.length < 200, long);
});
