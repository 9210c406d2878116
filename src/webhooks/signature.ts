/**
 * The signatures of a webhook delivery (CONTRACT §5.2), so that receivers can prove a delivery
 * came from Parley and was not replayed: Parley's own `X-Webhook-Signature: t=<ts>,v1=<hex>`
 * (HMAC-SHA256 keyed with the whole secret string over `<ts>.<body>`), and the Standard Webhooks
 * headers (`webhook-signature: v1,<base64>` over `<id>.<ts>.<body>`, keyed with the base64
 * decoding of what follows `whsec_`), which the `standardwebhooks` libraries verify unchanged.
 */
import { Buffer } from "node:buffer";
import { createHmac } from "node:crypto";

/** What one delivery attempt signs. */
export interface SignedDelivery {
  /** The event id (`evt_…`), the same on every attempt. */
  id: string;
  /** Unix seconds of this attempt. */
  timestamp: number;
  /** The exact body sent. */
  body: string;
  /** The application's `whsec_…` secret. */
  secret: string;
}

/** The signature headers of a delivery attempt. */
export function signatureHeaders(delivery: SignedDelivery): Record<string, string> {
  const { id, timestamp, body, secret } = delivery;
  const own = createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
  const standardKey = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const standard = createHmac("sha256", standardKey).update(`${id}.${timestamp}.${body}`)
    .digest("base64");
  return {
    "X-Webhook-Id": id,
    "X-Webhook-Timestamp": String(timestamp),
    "X-Webhook-Signature": `t=${timestamp},v1=${own}`,
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": `v1,${standard}`,
  };
}
