/**
 * Ad attribution: a WhatsApp customer who reaches the business through a Click-to-WhatsApp ad (or
 * a boosted post) sends a first message that carries Meta's `referral` — the ad's link, headline
 * and text, and the click id (`ctwa_clid`) that Meta's Conversions API takes back. Parley keeps it
 * as that message's `referral` (what a webhook consumer forwards), and the Slack thread shows
 * agents which ad the customer came from. Pure: no I/O.
 */
import { escapeMrkdwn, mrkdwnLink, truncatePlain } from "./slack_mrkdwn.ts";
import { storableText } from "./json_document.ts";

/** The `referral` fields Parley keeps, as Meta names them; each a non-blank string. */
export const AD_REFERRAL_FIELDS = [
  "source_url",
  "source_id",
  "source_type",
  "headline",
  "body",
  "media_type",
  "image_url",
  "video_url",
  "thumbnail_url",
  "ctwa_clid",
] as const;

/** A message's ad attribution: the fields of {@linkcode AD_REFERRAL_FIELDS} Meta sent. */
export type AdReferral = Partial<Record<(typeof AD_REFERRAL_FIELDS)[number], string>>;

/** Longest field kept (an ad's text is short; a field beyond this is cut, not refused). */
export const MAX_AD_REFERRAL_FIELD = 2_000;
/** How much of the headline (else the ad's text) the Slack line shows. */
const MAX_SHOWN = 100;
/** Longest ad link the Slack line links to (Meta's are short `fb.me` links). */
const MAX_SHOWN_URL = 500;

/**
 * The ad attribution in `raw` (Meta's `referral` object): its known string fields that are not
 * blank, each cut to {@linkcode MAX_AD_REFERRAL_FIELD} characters, a NUL or lone surrogate (which
 * PostgreSQL's text and jsonb refuse) made U+FFFD; `null` when `raw` is not an object or has none
 * of them.
 */
export function readAdReferral(raw: unknown): AdReferral | null {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return null;
  const referral: AdReferral = {};
  for (const field of AD_REFERRAL_FIELDS) {
    const value = (raw as Record<string, unknown>)[field];
    if (typeof value !== "string" || value.trim() === "") continue;
    referral[field] = storableText(truncatePlain(value, MAX_AD_REFERRAL_FIELD));
  }
  return Object.keys(referral).length === 0 ? null : referral;
}

/**
 * The line a Slack post of the customer's message opens with: `📣 From an ad: <link|headline>`
 * (a post rather than an ad when Meta says so; the ad's text when there is no headline; the
 * link alone, or no link, when that is all there is), as escaped mrkdwn of at most ~1,100
 * characters.
 */
export function renderAdReferralLine(referral: AdReferral): string {
  const what = referral.source_type === "post" ? "a post" : "an ad";
  const title = [referral.headline, referral.body].find((text) => text !== undefined);
  const shown = title === undefined
    ? undefined
    : truncatePlain(title.replace(/\s+/g, " ").trim(), MAX_SHOWN);
  const url = referral.source_url !== undefined && referral.source_url.length <= MAX_SHOWN_URL
    ? referral.source_url
    : undefined;
  const link = url === undefined
    ? (shown === undefined ? "" : `“${escapeMrkdwn(shown)}”`)
    : mrkdwnLink(url, shown === undefined ? "" : `“${shown}”`);
  return link === "" ? `📣 From ${what}` : `📣 From ${what}: ${link}`;
}
