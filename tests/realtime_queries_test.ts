import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import { createVisitor, sendMessages } from "./support/realtime.ts";
import { insertApplication } from "../src/db/applications.ts";
import {
  listClientChangesSince,
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

Deno.test("listClientChangesSince finds watched clients' conversations changed and messages edited or deleted since a time", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  const bob = await createVisitor(db.sql, app.id);
  const carl = await createVisitor(db.sql, app.id);
  const sent = await sendMessages(db.sql, [
    [app.id, ann, "Ann 1"],
    [app.id, ann, "Ann 2"],
    [app.id, ann, "Ann 3"],
    [app.id, bob, "Bob 1"],
    [app.id, carl, "Carl 1"],
  ]);
  // Everything so far is older than the window.
  await db.sql`UPDATE conversations SET created_at = now() - interval '1 hour',
    last_message_at = now() - interval '1 hour' WHERE app_id = ${app.id}`;
  await db.sql`UPDATE messages SET created_at = now() - interval '1 hour' WHERE app_id = ${app.id}`;
  const since = new Date(Date.now() - 60_000);
  await db.sql`UPDATE messages SET status = 'delivered', updated_at = now()
    WHERE app_id = ${app.id} AND id = ${sent[0].message_id}`;
  await db.sql`UPDATE messages SET deleted_at = now()
    WHERE app_id = ${app.id} AND id = ${sent[2].message_id}`;
  await db.sql`UPDATE messages SET updated_at = now() - interval '1 hour'
    WHERE app_id = ${app.id} AND id = ${sent[1].message_id}`;
  await db.sql`UPDATE conversations SET status = 'closed', closed_at = now()
    WHERE app_id = ${app.id} AND id = ${sent[3].chat_id}`;
  await db.sql`UPDATE messages SET updated_at = now()
    WHERE app_id = ${app.id} AND id = ${sent[4].message_id}`;
  const [note] = await db.sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, content, internal, updated_at)
    VALUES (${app.id}, ${sent[0].chat_id}, 'agent', 'note', true, now()) RETURNING id`;
  assert.ok(note.id);

  const changes = await listClientChangesSince(
    db.sql,
    [{ appId: app.id, clientId: ann }, { appId: app.id, clientId: bob }],
    since,
  );
  assert.deepEqual(
    changes.conversations.map(({ appId, chat }) => [appId, chat.id, chat.client_id, chat.status]),
    [[app.id, sent[3].chat_id, bob, "closed"]],
  );
  assert.deepEqual(
    changes.edited.map((e) => [e.clientId, e.message.content, e.message.status ?? null, e.deleted]),
    [[ann, "Ann 1", "delivered", false], [ann, "Ann 3", null, true]],
  );
  // Every message was created before the window.
  assert.deepEqual(changes.messages, []);
  // A conversation written to since counts; nothing at all changed after a later time.
  await db.sql`UPDATE conversations SET last_message_at = now() WHERE id = ${sent[0].chat_id}`;
  const written = await listClientChangesSince(db.sql, [{ appId: app.id, clientId: ann }], since);
  assert.deepEqual(written.conversations.map(({ chat }) => chat.id), [sent[0].chat_id]);
  assert.deepEqual(
    await listClientChangesSince(
      db.sql,
      [{ appId: app.id, clientId: ann }],
      new Date(Date.now() + 60_000),
    ),
    { conversations: [], messages: [], edited: [] },
  );
  assert.deepEqual(await listClientChangesSince(db.sql, [], since), {
    conversations: [],
    messages: [],
    edited: [],
  });
});
