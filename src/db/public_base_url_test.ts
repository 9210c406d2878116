import assert from "node:assert/strict";
import { createTestDatabase } from "../../tests/support/database.ts";
import { findPublicBaseUrl, recordPublicBaseUrl } from "./public_base_url.ts";

Deno.test("recordPublicBaseUrl() keeps an explicit address over later guesses, and takes a later explicit one", async () => {
  await using db = await createTestDatabase();
  assert.equal(await findPublicBaseUrl(db.sql), null);
  await recordPublicBaseUrl(db.sql, "http://localhost:3000", false);
  assert.equal(await findPublicBaseUrl(db.sql), "http://localhost:3000");
  await recordPublicBaseUrl(db.sql, "https://chat.example.com", true);
  await recordPublicBaseUrl(db.sql, "http://localhost:4000", false);
  assert.equal(await findPublicBaseUrl(db.sql), "https://chat.example.com");
  await recordPublicBaseUrl(db.sql, "https://support.example.com", true);
  assert.equal(await findPublicBaseUrl(db.sql), "https://support.example.com");
});
