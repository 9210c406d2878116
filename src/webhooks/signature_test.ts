import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { signatureHeaders } from "./signature.ts";

const SECRET = "whsec_" + "0123456789abcdef".repeat(4);

Deno.test("signatureHeaders() signs t.body with the whole secret as X-Webhook-Signature", () => {
  const body = '{"id":"evt_1","type":"message.sent"}';
  const headers = signatureHeaders({ id: "evt_1", timestamp: 1_795_000_000, body, secret: SECRET });
  const expected = createHmac("sha256", SECRET).update(`1795000000.${body}`).digest("hex");
  assert.equal(headers["X-Webhook-Signature"], `t=1795000000,v1=${expected}`);
  assert.equal(headers["X-Webhook-Id"], "evt_1");
  assert.equal(headers["X-Webhook-Timestamp"], "1795000000");
});

Deno.test("signatureHeaders() Standard Webhooks headers verify with the standardwebhooks library", () => {
  const body = JSON.stringify({ id: "evt_2", type: "chat.started", data: { text: "ünï" } });
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = signatureHeaders({ id: "evt_2", timestamp, body, secret: SECRET });
  const verified = new Webhook(SECRET).verify(body, {
    "webhook-id": headers["webhook-id"],
    "webhook-timestamp": headers["webhook-timestamp"],
    "webhook-signature": headers["webhook-signature"],
  });
  assert.deepEqual(verified, JSON.parse(body));
  assert.throws(() =>
    new Webhook(SECRET).verify(body + " ", {
      "webhook-id": headers["webhook-id"],
      "webhook-timestamp": headers["webhook-timestamp"],
      "webhook-signature": headers["webhook-signature"],
    })
  );
});
