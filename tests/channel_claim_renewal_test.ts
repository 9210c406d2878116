import assert from "node:assert/strict";
import { claimChannelSends, recordSendOutcome } from "../src/db/channel_sends.ts";
import { renewChannelClaims } from "../src/db/channel_claims.ts";
import { createTestDatabase } from "./support/database.ts";
import { createKeyedApp } from "./support/open_api.ts";

Deno.test("a channel send's lease is renewed under its claim, whose token still fences its record", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at)
    VALUES (${app}, 'whatsapp', 'message', '{"conversation_id": 1}', clock_timestamp())`;
  const [send] = (await claimChannelSends(db.sql, { kind: "whatsapp", limit: 1, leaseSeconds: 1 }))
    .rows;
  const leaseOf = async () =>
    (await db.sql`SELECT claimed_until > clock_timestamp() + interval '50 seconds' AS long
      FROM outbox WHERE id = ${send.id}`)[0].long;
  assert.equal(await leaseOf(), false);
  // A claim that is not the current one renews nothing.
  await renewChannelClaims(db.sql, [{ ...send, claimedAt: "2026-01-01T00:00:00Z" }], 60);
  assert.equal(await leaseOf(), false);
  await renewChannelClaims(db.sql, [send], 60);
  assert.equal(await leaseOf(), true);
  // Once its lease ran out, nobody else took it meanwhile: renewed, it is still this sender's.
  assert.equal(
    (await claimChannelSends(db.sql, { kind: "whatsapp", limit: 1, leaseSeconds: 1 })).rows.length,
    0,
  );
  await recordSendOutcome(db.sql, { ...send, messageId: null, chatId: null }, { state: "sent" });
  const [row] = await db
    .sql`SELECT state, claimed_until, claimed_at FROM outbox WHERE id = ${send.id}`;
  assert.deepEqual({ ...row }, { state: "succeeded", claimed_until: null, claimed_at: null });
});

Deno.test("a send claimed again after its lease ran out is recorded by the new claim only", async () => {
  await using db = await createTestDatabase();
  const app = (await createKeyedApp(db.sql)).appId;
  await db.sql`
    INSERT INTO outbox (app_id, kind, topic, payload, run_at)
    VALUES (${app}, 'whatsapp', 'message', '{"conversation_id": 1}', clock_timestamp())`;
  const [first] =
    (await claimChannelSends(db.sql, { kind: "whatsapp", limit: 1, leaseSeconds: 60 }))
      .rows;
  await db.sql`UPDATE outbox SET claimed_until = clock_timestamp() - interval '1 second'`;
  const [second] =
    (await claimChannelSends(db.sql, { kind: "whatsapp", limit: 1, leaseSeconds: 60 })).rows;
  assert.equal(second.id, first.id);
  // The first claim's sender, late, can neither renew nor record.
  await renewChannelClaims(db.sql, [first], 600);
  await recordSendOutcome(db.sql, { ...first, messageId: null, chatId: null }, { state: "sent" });
  const [row] = await db.sql`
    SELECT state, claimed_until < clock_timestamp() + interval '120 seconds' AS own_lease
    FROM outbox WHERE id = ${first.id}`;
  assert.deepEqual({ ...row }, { state: "pending", own_lease: true });
});
