import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { insertApplication } from "../src/db/applications.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { isMediaWithdrawn, recordMediaMessages } from "../src/db/channel_media.ts";

Deno.test("a file is withdrawn once every message carrying it is deleted or taken from the visitor", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const [created] = await commitBatch(db.sql, [
    { kind: "visitor.create", appId: app.id, tokenHash: "h1", name: "Ann", email: null },
  ]);
  assert.ok(created.ok);
  const clientId = (created.value as { client_id: number }).client_id;
  const [sent] = await commitBatch(db.sql, [
    { kind: "visitor.message", appId: app.id, clientId, messageType: "text", content: "hi" },
  ]);
  assert.ok(sent.ok);
  const chatId = (sent.value as { chat_id: number }).chat_id;
  const [shared, sharedAgain, note] = await db.sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, internal)
    SELECT ${app.id}, ${chatId}, 'agent', 'file', '{}', internal
    FROM unnest('{false,false,true}'::boolean[]) WITH ORDINALITY AS t (internal, n) ORDER BY n
    RETURNING id`;
  const withdrawn = (mediaId: string) => isMediaWithdrawn(db.sql, "slack", app.id, mediaId);
  // Nothing recorded (a file received before the record existed): served.
  assert.equal(await withdrawn("F0OLD"), false);
  await recordMediaMessages(db.sql, "slack", [
    { appId: app.id, mediaId: "F0TWICE", messageId: shared.id },
    { appId: app.id, mediaId: "F0TWICE", messageId: sharedAgain.id },
    { appId: app.id, mediaId: "F0NOTE", messageId: note.id },
  ]);
  await db.sql`UPDATE messages SET deleted_at = now() WHERE id = ${shared.id}`;
  assert.equal(await withdrawn("F0TWICE"), false, "still carried by a message the visitor has");
  await db.sql`
    UPDATE messages SET internal = true, hidden_at = now() WHERE id = ${sharedAgain.id}`;
  assert.equal(await withdrawn("F0TWICE"), true);
  assert.equal(await withdrawn("F0NOTE"), false, "a note's file still serves the team");
  await db.sql`UPDATE messages SET deleted_at = now() WHERE id = ${note.id}`;
  assert.equal(await withdrawn("F0NOTE"), true);
  assert.equal(
    await isMediaWithdrawn(db.sql, "whatsapp", app.id, "F0TWICE"),
    false,
    "by channel",
  );
});
