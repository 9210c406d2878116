/**
 * Links to channel media through Parley's proxies (`/api/v1/whatsapp/media/{id}`,
 * `/api/v1/slack/media/{id}`): the platforms' own file URLs need the channel's token (and Meta's
 * expire within minutes), so message payloads carry a Parley link instead, signed (HMAC-SHA256
 * with a key derived from `PARLEY_ENCRYPTION_KEY`) for one proxy, one application and one media
 * id, and expiring after 24 hours.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { Buffer } from "node:buffer";

/** How long a link stays valid (CONTRACT §6.1). */
export const MEDIA_LINK_TTL_SECONDS = 24 * 3600;

/** The longest media id a link may name (Meta's and Slack's are a few dozen characters). */
const MAX_MEDIA_ID_LENGTH = 1_024;

/** Signs and checks media links. */
export interface MediaLinks {
  /** The proxy link of `mediaId` received for `appId`: `…/{mediaId}?exp=<unix>&sig=<hex>`. */
  link(appId: number, mediaId: string): string;
  /**
   * Which of the applications that received `mediaId` (`appsOf` looks them up, only for a
   * well-formed, unexpired link of a media id that can be one) a proxy request's query is a valid
   * link of; null when none.
   */
  verify(
    mediaId: string,
    query: { exp?: string; sig?: string },
    appsOf: () => Promise<readonly number[]>,
  ): Promise<number | null>;
}

/** Options of {@linkcode createMediaLinks}. */
export interface MediaLinksOptions {
  /** The secret-box key; the signing key is derived from it. */
  encryptionKey: Uint8Array;
  publicBaseUrl: string;
  /** The proxy's path, before the media id. @default "/api/v1/whatsapp/media" */
  path?: string;
  /** What the signature is bound to besides the media (one key, many proxies). @default "whatsapp" */
  purpose?: string;
  /** @default Date.now */
  now?: () => number;
}

/**
 * Creates the signer. A link's signature covers its application (the URL keeps the contract's
 * `?exp=&sig=` form): the proxy tries the applications that received the media id
 * (`channel_media`) and fetches with the token of the one the link was signed for, so that a
 * media id another application also claims never reaches this one's files.
 */
export function createMediaLinks(options: MediaLinksOptions): MediaLinks {
  const key = createHmac("sha256", options.encryptionKey).update("parley media links v1").digest();
  const now = options.now ?? Date.now;
  const path = options.path ?? "/api/v1/whatsapp/media";
  const purpose = options.purpose ?? "whatsapp";
  const sign = (appId: number, mediaId: string, expires: number) =>
    createHmac("sha256", key).update(`${purpose}:${appId}:${mediaId}:${expires}`).digest("hex");
  return {
    link(appId, mediaId) {
      const exp = Math.floor(now() / 1000) + MEDIA_LINK_TTL_SECONDS;
      const query = new URLSearchParams({ exp: String(exp), sig: sign(appId, mediaId, exp) });
      return `${options.publicBaseUrl}${path}/${encodeURIComponent(mediaId)}?${query}`;
    },
    async verify(mediaId, query, appsOf) {
      if (!/^[0-9]{1,12}$/.test(query.exp ?? "")) return null;
      if (!/^[0-9a-f]{64}$/.test(query.sig ?? "")) return null;
      const exp = Number(query.exp);
      if (exp * 1000 < now()) return null;
      // No platform's media id holds a NUL (nor could PostgreSQL's text, where it is looked up).
      if (mediaId === "" || mediaId.length > MAX_MEDIA_ID_LENGTH || mediaId.includes("\0")) {
        return null;
      }
      const given = Buffer.from(query.sig!, "hex");
      return (await appsOf()).find((appId) =>
        timingSafeEqual(Buffer.from(sign(appId, mediaId, exp), "hex"), given)
      ) ?? null;
    },
  };
}
