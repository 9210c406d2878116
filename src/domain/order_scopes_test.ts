import assert from "node:assert/strict";
import { slackOrderScopes, whatsappOrderScopes } from "./order_scopes.ts";

function delivery(value: Record<string, unknown>) {
  return {
    object: "whatsapp_business_account",
    entry: [{ id: "1", changes: [{ field: "messages", value }] }],
  };
}

Deno.test("a WhatsApp delivery is scoped by its customers' numbers and user ids", () => {
  // Meta's sample text message.
  const text = delivery({
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: "106540352242922" },
    contacts: [{ profile: { name: "Sheena Nelson" }, wa_id: "16505551234" }],
    messages: [{
      from: "16505551234",
      id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
      timestamp: "1749416383",
      type: "text",
      text: { body: "Does it come in another color?" },
    }],
  });
  assert.deepEqual(whatsappOrderScopes(text), ["wa:16505551234"]);
  assert.deepEqual(
    whatsappOrderScopes(delivery({
      contacts: [{ profile: { name: "A" }, wa_id: "111", user_id: "US.1" }],
      messages: [
        { from: "111", id: "w1", type: "text" },
        { from_user_id: "US.2", id: "w2", type: "text" },
        { id: "w3", type: "system", system: { previous_user_id: "US.3", user_id: "US.4" } },
      ],
    }))?.sort(),
    ["user:US.1", "user:US.2", "user:US.3", "wa:111"],
  );
});

Deno.test("a WhatsApp delivery of status receipts alone waits for nothing", () => {
  // Meta's sample failed status.
  const failed = delivery({
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: "106540352242922" },
    statuses: [{
      id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0QUQ2MjA4NEYyRkExNjMyREUA",
      status: "failed",
      timestamp: "1751142888",
      recipient_id: "16505551234",
      errors: [{
        code: 131049,
        title: "This message was not delivered to maintain healthy ecosystem engagement.",
      }],
    }],
  });
  assert.deepEqual(whatsappOrderScopes(failed), []);
});

Deno.test("a WhatsApp delivery that cannot be read is ordered with everything", () => {
  assert.equal(whatsappOrderScopes(null), null);
  assert.equal(whatsappOrderScopes({ entry: "x" }), null);
  assert.equal(whatsappOrderScopes({ entry: [{ changes: {} }] }), null);
  assert.equal(whatsappOrderScopes(delivery({ messages: {} })), null);
  assert.equal(whatsappOrderScopes(delivery({ messages: [{ id: "w", type: "text" }] })), null);
});

Deno.test("a Slack request is scoped by its thread", () => {
  const reply = {
    type: "event_callback",
    team_id: "T1",
    event: { type: "message", channel: "C1", thread_ts: "100.1", ts: "100.9", text: "hi" },
  };
  assert.deepEqual(slackOrderScopes("event", reply), ["C1:100.1"]);
  const edited = {
    event: {
      type: "message",
      subtype: "message_changed",
      channel: "C1",
      ts: "200.5",
      message: { ts: "100.9", thread_ts: "100.1" },
    },
  };
  assert.deepEqual(slackOrderScopes("event", edited), ["C1:100.1"]);
  const deleted = {
    event: {
      type: "message",
      subtype: "message_deleted",
      channel: "C1",
      ts: "200.6",
      previous_message: { ts: "100.9", thread_ts: "100.1" },
    },
  };
  assert.deepEqual(slackOrderScopes("event", deleted), ["C1:100.1"]);
  // The root message's Close button and a Flow button in the thread share the thread's scope.
  const close = {
    type: "block_actions",
    container: { type: "message", message_ts: "100.1", channel_id: "C1" },
    message: { ts: "100.1" },
  };
  assert.deepEqual(slackOrderScopes("action", close), ["C1:100.1"]);
  const click = {
    type: "block_actions",
    container: { type: "message", message_ts: "100.7", channel_id: "C1", thread_ts: "100.1" },
    message: { ts: "100.7", thread_ts: "100.1" },
  };
  assert.deepEqual(slackOrderScopes("action", click), ["C1:100.1"]);
  assert.equal(slackOrderScopes("event", { type: "app_rate_limited" }), null);
  assert.equal(slackOrderScopes("action", null), null);
  // Ids no Slack request has (PostgreSQL could not store a NUL): ordered with everything.
  const nul = { event: { type: "message", channel: "C\u00001", thread_ts: "100.1" } };
  assert.equal(slackOrderScopes("event", nul), null);
  const long = { event: { type: "message", channel: "C1", thread_ts: "1".repeat(256) } };
  assert.equal(slackOrderScopes("event", long), null);
});
