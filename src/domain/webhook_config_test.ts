import assert from "node:assert/strict";
import { AppError } from "./app_error.ts";
import { webhookConfigOf } from "./webhook_config.ts";

Deno.test("webhookConfigOf() resets omitted fields to their zero values", () => {
  assert.deepEqual(webhookConfigOf({}), { url: "", events: [], enabled: false });
  assert.deepEqual(webhookConfigOf({ url: "https://example.com/hook" }), {
    url: "https://example.com/hook",
    events: [],
    enabled: true,
  });
});

Deno.test("webhookConfigOf() drops unknown events and duplicates and keeps the catalogue order", () => {
  const config = webhookConfigOf({
    url: "https://example.com/hook",
    events: ["message.sent", "nope", "chat.started", "message.sent", "CHAT.ENDED"],
  });
  assert.deepEqual(config.events, ["chat.started", "message.sent"]);
});

Deno.test("webhookConfigOf() forces enabled to false for a blank url", () => {
  assert.equal(webhookConfigOf({ url: "  ", enabled: true }).enabled, false);
  assert.equal(webhookConfigOf({ url: "https://example.com", enabled: false }).enabled, false);
  assert.equal(webhookConfigOf({ url: " https://example.com " }).url, "https://example.com");
  assert.equal(webhookConfigOf({ url: " \r\n " }).url, "");
  assert.equal(
    webhookConfigOf({ url: "\u00a0https://example.com\u3000" }).url,
    "https://example.com",
  );
  // Not whitespace to forgive: the SSRF guard refuses it (CONTRACT §5.3).
  assert.equal(webhookConfigOf({ url: "https://example.com\r\n" }).url, "https://example.com\r\n");
  assert.equal(webhookConfigOf({ url: "\thttps://example.com" }).url, "\thttps://example.com");
});

Deno.test("webhookConfigOf() refuses wrong shapes with the contract's message", () => {
  const cases: [unknown, string][] = [
    [[], "body must be a JSON object"],
    [null, "body must be a JSON object"],
    ["text", "body must be a JSON object"],
    [{ url: 5 }, "url must be a string"],
    [{ url: null }, "url must be a string"],
    [{ events: "chat.started" }, "events must be an array of strings"],
    [{ events: [1] }, "events must be an array of strings"],
    [{ enabled: "true" }, "enabled must be a boolean"],
    [{ url: "https://e.com/" + "a".repeat(2048) }, "url must be at most 2048 characters"],
  ];
  for (const [body, detail] of cases) {
    assert.throws(
      () => webhookConfigOf(body),
      (error: unknown) =>
        error instanceof AppError && error.status === 400 &&
        error.message === `Invalid webhook configuration: ${detail}`,
      JSON.stringify(body),
    );
  }
});
