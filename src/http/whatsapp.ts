/**
 * The WhatsApp Cloud channel's endpoints (CONTRACT §6.1), under `/api/v1/whatsapp`: Meta's
 * webhook verification handshake, the webhook itself — signature checked over the raw bytes,
 * the body stored, 200 answered, the updates applied after the answer — and the media proxy
 * that serves customers' files to whoever holds a link Parley signed.
 */
import { formFieldBytes } from "../domain/form_urlencoded.ts";
import { Hono } from "hono";
import { readRequestBody } from "./middleware/body_size_limit.ts";
import { timingSafeEqual } from "node:crypto";
import { Buffer } from "node:buffer";
import type { Sql } from "../db/client.ts";
import { findWhatsAppChannel } from "../db/whatsapp_channels.ts";
import { insertWhatsAppDeliveries } from "../db/whatsapp_inbound.ts";
import { createBatchedWriter, STORE_LINGER_MS } from "../db/batched_writer.ts";
import { findMediaApps } from "../db/channel_media.ts";
import type { SecretBox } from "../crypto/secret_box.ts";
import { AppError } from "../domain/app_error.ts";
import { describeError, log } from "../log.ts";
import { couldBeMetaSignature, isValidMetaSignature } from "../channels/whatsapp/signature.ts";
import type { WhatsAppInboundProcessor } from "../channels/whatsapp/inbound_processor.ts";
import { parseJsonBytes } from "../domain/json_document.ts";
import { whatsappOrderScopes } from "../domain/order_scopes.ts";
import type { MediaLinks } from "../channels/media_links.ts";
import { downloadMedia, lookUpMedia } from "../channels/whatsapp/graph_client.ts";
import { methodNotAllowed } from "./method_not_allowed.ts";
import { drawStorerId } from "../channels/earlier_deliveries.ts";
import { mediaResponse } from "./media_response.ts";
import { isMetaMediaHost } from "../domain/media_hosts.ts";

/** What the WhatsApp routes need. */
export interface WhatsAppRoutesDeps {
  sql: Sql;
  secretBox: SecretBox;
  inbound: Pick<WhatsAppInboundProcessor, "process">;
  mediaLinks: MediaLinks;
  whatsappGraphUrl: string;
}

/** Largest webhook body accepted: Meta batches up to 1,000 updates in one delivery. */
export const MAX_WHATSAPP_BODY_BYTES = 8 * 1024 * 1024;

/** How long a channel's opened secrets are reused (a reconfiguration shows within this). */
const CHANNEL_CACHE_MS = 5_000;

interface OpenedChannel {
  phoneNumberId: string;
  accessToken: string;
  appSecret: string;
  verifyToken: string;
}

function equalSecrets(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Routes under `/api/v1/whatsapp`. */
export function whatsappRoutes(deps: WhatsAppRoutesDeps): Hono {
  const channels = new Map<number, { channel: OpenedChannel | null; until: number }>();

  async function channelOf(appIdText: string): Promise<OpenedChannel | null> {
    if (!/^[1-9][0-9]{0,15}$/.test(appIdText)) return null;
    const appId = Number(appIdText);
    const cached = channels.get(appId);
    if (cached && cached.until > Date.now()) return cached.channel;
    const stored = await findWhatsAppChannel(deps.sql, appId);
    const channel = stored && {
      phoneNumberId: stored.phoneNumberId,
      accessToken: deps.secretBox.open(stored.accessTokenSealed),
      appSecret: deps.secretBox.open(stored.appSecretSealed),
      verifyToken: deps.secretBox.open(stored.verifyTokenSealed),
    };
    if (channels.size > 10_000) channels.clear();
    channels.set(appId, { channel, until: Date.now() + CHANNEL_CACHE_MS });
    return channel;
  }

  // Deliveries arriving together are stored in one statement, as this instance's.
  const storedBy = drawStorerId();
  const storeDelivery = createBatchedWriter(
    (rows: { appId: number; body: Uint8Array; scopes: string[] | null }[]) =>
      insertWhatsAppDeliveries(deps.sql, storedBy, rows),
    { lingerMs: STORE_LINGER_MS },
  );
  const routes = new Hono();

  routes.get("/webhook/:appId", async (c) => {
    const channel = await channelOf(c.req.param("appId"));
    const mode = c.req.query("hub.mode");
    const token = c.req.query("hub.verify_token") ?? "";
    if (!channel || mode !== "subscribe" || !equalSecrets(token, channel.verifyToken)) {
      throw new AppError(403, "Verification failed");
    }
    // Echoed byte for byte, also when its bytes are not UTF-8.
    const challenge = formFieldBytes(new URL(c.req.url).search, "hub.challenge");
    return c.body(challenge ?? new Uint8Array(0), 200, {
      "content-type": "text/plain; charset=utf-8",
    });
  });

  routes.post(
    "/webhook/:appId",
    async (c) => {
      const appIdText = c.req.param("appId");
      const channel = await channelOf(appIdText);
      // No channel, no secret to match: refused like any other signature (CONTRACT §6.1), the
      // body unread.
      if (!channel) throw new AppError(401, "Invalid signature");
      // A header that cannot pass costs no upload, whatever its size; a body gets 10 s to arrive.
      const signature = c.req.header("x-hub-signature-256");
      if (!couldBeMetaSignature(signature, channel.appSecret) || !c.req.raw.body) {
        throw new AppError(401, "Invalid signature");
      }
      const raw = await readRequestBody(c.req.raw, MAX_WHATSAPP_BODY_BYTES);
      if (!isValidMetaSignature(raw, signature, channel.appSecret)) {
        throw new AppError(401, "Invalid signature");
      }
      const appId = Number(appIdText);
      // Parsed once, here: its customers order it with their other deliveries.
      const document = parseJsonBytes(raw);
      const scopes = document === undefined ? null : whatsappOrderScopes(document);
      const { id: deliveryId, earlier } = await storeDelivery({ appId, body: raw, scopes });
      // Meta wants its answer at once; the updates are applied after it (and again after a
      // crash: the stored delivery stays unprocessed until they are).
      setTimeout(() => {
        const { phoneNumberId } = channel;
        deps.inbound.process(appId, deliveryId, raw, { phoneNumberId, document, earlier }).catch((
          error,
        ) => log("error", "whatsapp delivery failed", { app_id: appId, ...describeError(error) }));
      }, 0);
      return c.body(null, 200);
    },
  );

  routes.get("/media/:mediaId", async (c) => {
    const mediaId = c.req.param("mediaId");
    const appId = await deps.mediaLinks.verify(
      mediaId,
      c.req.query(),
      () => findMediaApps(deps.sql, "whatsapp", mediaId),
    );
    if (appId === null) throw new AppError(403, "Invalid or expired media link");
    const channel = await channelOf(String(appId));
    if (!channel) throw new AppError(404, "Media not found");
    const access = { graphUrl: deps.whatsappGraphUrl, accessToken: channel.accessToken };
    // Meta's download URL expires within minutes: it is looked up for every request, and once
    // more when the download says it expired.
    for (let attempt = 0; attempt < 2; attempt++) {
      const found = await lookUpMedia(access, mediaId);
      if (!found.ok) {
        if (found.failure.status === 0 || found.failure.status >= 500) {
          throw new AppError(502, "WhatsApp did not answer");
        }
        throw new AppError(404, "Media not found");
      }
      // The access token goes only to Meta's own media hosts (as Slack's to Slack's: 403).
      if (!isMetaMediaHost(found.media.url, deps.whatsappGraphUrl)) {
        throw new AppError(403, "File is not on a Meta media host");
      }
      const download = await downloadMedia(access, found.media.url);
      if (!download.ok) {
        if (attempt === 0 && [401, 403, 404, 410].includes(download.failure.status)) continue;
        throw new AppError(502, "WhatsApp did not answer");
      }
      return mediaResponse(
        download.response.body,
        download.response.headers.get("content-type") ?? found.media.mimeType ??
          "application/octet-stream",
        download.response.headers.get("content-length"),
        download.response.headers.get("content-encoding"),
      );
    }
    throw new AppError(502, "WhatsApp did not answer");
  });

  methodNotAllowed(routes, ["/webhook/:appId", "/media/:mediaId"]);
  return routes;
}
