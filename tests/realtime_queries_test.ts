import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { createVisitor, sendMessages } from "./support/realtime.ts";
import { insertApplication } from "../src/db/applications.ts";
import {
  listClientMessagesSince,
  listConversationsByIds,
  listMessagesInRange,
} from "../src/db/realtime.ts";

Deno.test("realtime queries return visible messages in id order: by range for applications, since a time for watched clients", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const ann = await createVisitor(db.sql, app.id);
  const bob = await createVisitor(db.sql, app.id);
  const eve = await createVisitor(db.sql, other.id);
  const since = new Date(Date.now() - 60_000);
  const sent = await sendMessages(db.sql, [
    [app.id, ann, "Ann 1"],
    [app.id, bob, "Bob 1"],
    [app.id, ann, "Ann deleted"],
    [other.id, eve, "Eve 1"],
    [app.id, ann, "Ann 2"],
  ]);
  await db.sql`UPDATE messages SET deleted_at = now()
    WHERE app_id = ${app.id} AND id = ${sent[2].message_id}`;
  await db.sql`INSERT INTO messages (app_id, conversation_id, sender_type, content, internal)
    VALUES (${app.id}, ${sent[0].chat_id}, 'agent', 'note', true)`;
  const watched = [{ appId: app.id, clientId: ann }, { appId: other.id, clientId: eve }];
  const range: [number, number] = [sent[0].message_id, sent[4].message_id + 1];

  const inRange = await listMessagesInRange(db.sql, [app.id, other.id, app.id], range);
  const contents = (messages: typeof inRange) =>
    messages.map((m) => [m.appId, m.clientId, m.message.content]);
  assert.deepEqual(contents(inRange), [
    [app.id, ann, "Ann 1"],
    [app.id, bob, "Bob 1"],
    [other.id, eve, "Eve 1"],
    [app.id, ann, "Ann 2"],
  ]);
  assert.deepEqual(
    contents(await listMessagesInRange(db.sql, [other.id], range)),
    [[other.id, eve, "Eve 1"]],
  );
  assert.deepEqual(
    contents(await listMessagesInRange(db.sql, [app.id], [sent[1].message_id, sent[3].message_id])),
    [[app.id, bob, "Bob 1"]],
  );
  const replayed = await listClientMessagesSince(db.sql, watched, since);
  assert.deepEqual(contents(replayed), [
    [app.id, ann, "Ann 1"],
    [other.id, eve, "Eve 1"],
    [app.id, ann, "Ann 2"],
  ]);
  assert.deepEqual(
    await listClientMessagesSince(db.sql, watched, new Date(Date.now() + 60_000)),
    [],
  );
  assert.deepEqual(await listMessagesInRange(db.sql, [], range), []);
});

Deno.test("listConversationsByIds loads each named conversation of its own application", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const ann = await createVisitor(db.sql, app.id);
  const [sent] = await sendMessages(db.sql, [[app.id, ann, "Hi"]]);
  const chats = await listConversationsByIds(db.sql, [
    [app.id, sent.chat_id],
    [other.id, sent.chat_id],
  ]);
  assert.equal(chats.length, 1);
  assert.equal(chats[0].appId, app.id);
  assert.equal(chats[0].chat.id, sent.chat_id);
  assert.equal(chats[0].chat.client_id, ann);
  assert.equal(chats[0].chat.status, "open");
  assert.equal("app_id" in chats[0].chat, false);
});
