import assert from "node:assert/strict";
import { createTestDatabase } from "./support/database.ts";
import {
  createVisitor,
  delay,
  sendMessages,
  startHubServer,
  startOutageProxy,
  waitUntil,
} from "./support/realtime.ts";
import { insertApplication } from "../src/db/applications.ts";
import { listMessages } from "../src/db/messages.ts";
import { findConversation } from "../src/db/conversations.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { connect, type Sql } from "../src/db/client.ts";
import { CHANGES_CHANNEL } from "../src/domain/change_notice.ts";
import { createRealtimeHub } from "../src/realtime/hub.ts";

const MICROSECOND_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

async function insertInternalNote(sql: Sql, appId: number, chatId: number): Promise<number> {
  const [row] = await sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, content, internal)
    VALUES (${appId}, ${chatId}, 'agent', 'note: VIP', true)
    RETURNING id`;
  await sql`SELECT pg_notify(${CHANGES_CHANNEL}, ${
    JSON.stringify({ a: [appId], m: [row.id, row.id] })
  })`;
  return row.id;
}

/** A LISTEN pool that reaches the database through a proxy the test cuts and restores. */
function listenThroughOutageProxy(databaseUrl: string) {
  const proxy = startOutageProxy(databaseUrl);
  const listenSql = connect(proxy.url, { max: 1 });
  return {
    proxy,
    listenSql,
    async [Symbol.asyncDispose]() {
      await listenSql.end({ timeout: 1 });
      await proxy[Symbol.asyncDispose]();
    },
  };
}

Deno.test("hub pushes a committed message to the visitor's socket with the exact Message shape", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, listenSql: db.sql });
  const visitor = await server.connect(app.id, clientId);
  assert.equal(server.hub.socketCount, 1);

  const [sent] = await sendMessages(db.sql, [[app.id, clientId, "Hello"]]);
  await waitUntil(() => visitor.frames.length === 2, "the chat and message frames");

  const [message] = await listMessages(db.sql, app.id, sent.chat_id, {
    limit: 1,
    includeInternal: false,
  });
  const chat = await findConversation(db.sql, app.id, sent.chat_id);
  assert.deepEqual(visitor.frames, [
    { type: "chat.updated", chat_id: sent.chat_id, message: chat, chat },
    { type: "message.created", chat_id: sent.chat_id, message },
  ]);
  assert.equal(message.id, sent.message_id);
  assert.match(message.created_at, MICROSECOND_TIMESTAMP);
});

Deno.test("hub never pushes another visitor's messages nor internal notes", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const other = await insertApplication(db.sql, "Other");
  const ann = await createVisitor(db.sql, app.id);
  const bob = await createVisitor(db.sql, app.id);
  const eve = await createVisitor(db.sql, other.id);
  await using server = await startHubServer({ sql: db.sql, listenSql: db.sql });
  const annSocket = await server.connect(app.id, ann);
  const annSecondTab = await server.connect(app.id, ann);
  const bobSocket = await server.connect(app.id, bob);
  const eveSocket = await server.connect(other.id, eve);

  // One batch, one notice whose range covers both visitors' messages.
  const [annSent] = await sendMessages(db.sql, [[app.id, ann, "Ann 1"], [app.id, bob, "Bob 1"]]);
  await sendMessages(db.sql, [[other.id, eve, "Eve 1"]]);
  await insertInternalNote(db.sql, app.id, annSent.chat_id);
  // Handled in notice order: once this arrives, the note's notice has been handled too.
  await sendMessages(db.sql, [[app.id, ann, "Ann 2"]]);

  await waitUntil(() => annSocket.contents().length === 2, "Ann's second message");
  await waitUntil(() => annSecondTab.contents().length === 2, "Ann's second tab");
  await waitUntil(() => bobSocket.contents().length === 1, "Bob's message");
  await waitUntil(() => eveSocket.contents().length === 1, "Eve's message");
  assert.deepEqual(annSocket.contents(), ["Ann 1", "Ann 2"]);
  assert.deepEqual(annSecondTab.contents(), ["Ann 1", "Ann 2"]);
  assert.deepEqual(bobSocket.contents(), ["Bob 1"]);
  assert.deepEqual(eveSocket.contents(), ["Eve 1"]);
  for (const frame of annSocket.frames) {
    if (frame.type === "chat.updated") assert.equal(frame.chat.client_id, ann);
    else if (frame.type !== "message.deleted") assert.equal(frame.message.internal, undefined);
  }
});

Deno.test("hub pushes chat.updated when a conversation closes", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  const [sent] = await sendMessages(db.sql, [[app.id, clientId, "Hello"]]);
  await using server = await startHubServer({ sql: db.sql, listenSql: db.sql });
  const visitor = await server.connect(app.id, clientId);

  await commitBatch(db.sql, [{ kind: "chat.close", appId: app.id, chatId: sent.chat_id }]);
  await waitUntil(() => visitor.frames.length === 1, "the chat.updated frame");

  const chat = await findConversation(db.sql, app.id, sent.chat_id);
  assert.equal(chat?.status, "closed");
  assert.deepEqual(visitor.frames, [
    { type: "chat.updated", chat_id: sent.chat_id, message: chat, chat },
  ]);
});

Deno.test("hub pushes a message once when notices repeat or overlap its id, turn by turn", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  // No listener: this test hands the notices to the hub itself.
  await using server = await startHubServer({ sql: db.sql });
  const visitor = await server.connect(app.id, clientId);
  const sent = await sendMessages(db.sql, [
    [app.id, clientId, "1"],
    [app.id, clientId, "2"],
    [app.id, clientId, "3"],
  ]);
  const [first, second, third] = sent.map((s) => s.message_id);
  const notice = (m: [number, number]) => JSON.stringify({ a: [app.id], m });

  // A notice handled on its own turn pushes at once; those that wait for the next turn together
  // are read together, their messages in id order, each once.
  await server.hub.handleNotice(notice([second, second]));
  await Promise.all([
    server.hub.handleNotice(notice([first, first])),
    server.hub.handleNotice(notice([second, second])),
    server.hub.handleNotice(notice([first - 10, third + 10])),
    server.hub.handleNotice(notice([first, third])),
  ]);
  await waitUntil(() => visitor.contents().length >= 3, "the three messages");
  await delay(50);
  assert.deepEqual(visitor.contents(), ["2", "1", "3"]);
});

Deno.test("hub replays messages committed while the LISTEN connection was terminated", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, listenSql: db.sql });
  const visitor = await server.connect(app.id, clientId);
  await sendMessages(db.sql, [[app.id, clientId, "before"]]);
  await waitUntil(() => visitor.contents().length === 1, "the first message");

  const terminated = await db.sql`
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND query ILIKE 'listen%' AND pid <> pg_backend_pid()`;
  assert.equal(terminated.length, 1);
  await sendMessages(db.sql, [[app.id, clientId, "during 1"]]);
  await sendMessages(db.sql, [[app.id, clientId, "during 2"]]);

  await waitUntil(() => server.reconnects === 1, "the reconnect");
  await waitUntil(() => visitor.contents().length === 3, "the messages sent during the outage");
  await sendMessages(db.sql, [[app.id, clientId, "after"]]);
  await waitUntil(() => visitor.contents().length === 4, "the message sent after the reconnect");
  assert.deepEqual(visitor.contents(), ["before", "during 1", "during 2", "after"]);
});

Deno.test("hub replays messages committed while the LISTEN connection was cut and held", async () => {
  await using db = await createTestDatabase();
  await using outage = listenThroughOutageProxy(db.url);
  const { proxy, listenSql } = outage;
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  const neighbour = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, listenSql });
  const visitor = await server.connect(app.id, clientId);
  await sendMessages(db.sql, [[app.id, clientId, "before"]]);
  await waitUntil(() => visitor.contents().length === 1, "the first message");

  proxy.cut();
  await sendMessages(db.sql, [[app.id, clientId, "during 1"], [app.id, neighbour, "not yours"]]);
  await sendMessages(db.sql, [[app.id, clientId, "during 2"]]);
  await delay(200);
  // Their notices went to nobody: only the replay can bring them.
  assert.deepEqual(visitor.contents(), ["before"]);
  assert.equal(server.reconnects, 0);

  proxy.restore();
  await waitUntil(() => server.reconnects === 1, "the reconnect");
  await waitUntil(() => visitor.contents().length === 3, "the replayed messages");
  await sendMessages(db.sql, [[app.id, clientId, "after"]]);
  await waitUntil(() => visitor.contents().length === 4, "the message sent after the reconnect");
  assert.deepEqual(visitor.contents(), ["before", "during 1", "during 2", "after"]);
});

Deno.test("hub replays conversation state, edits and deletions committed while the LISTEN connection was cut", async () => {
  await using db = await createTestDatabase();
  await using outage = listenThroughOutageProxy(db.url);
  const { proxy, listenSql } = outage;
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, listenSql });
  const visitor = await server.connect(app.id, clientId);
  const [kept, removed] = await sendMessages(db.sql, [
    [app.id, clientId, "kept"],
    [app.id, clientId, "removed"],
  ]);
  await waitUntil(() => visitor.contents().length === 2, "the first messages");
  const before = visitor.frames.length;

  proxy.cut();
  await db.sql`UPDATE messages SET status = 'read', updated_at = clock_timestamp()
    WHERE app_id = ${app.id} AND id = ${kept.message_id}`;
  await db.sql`UPDATE messages SET deleted_at = clock_timestamp()
    WHERE app_id = ${app.id} AND id = ${removed.message_id}`;
  await db.sql`UPDATE conversations SET status = 'closed', closed_at = clock_timestamp()
    WHERE app_id = ${app.id} AND id = ${kept.chat_id}`;
  await delay(200);
  assert.equal(visitor.frames.length, before);

  proxy.restore();
  await waitUntil(() => server.reconnects === 1, "the reconnect");
  await waitUntil(() => visitor.frames.length === before + 3, "the replayed changes");
  await delay(50);
  const replayed = visitor.frames.slice(before);
  assert.deepEqual(replayed.map((frame) => frame.type), [
    "chat.updated",
    "message.updated",
    "message.deleted",
  ]);
  const [chat, updated, deleted] = replayed;
  assert.equal(chat.type === "chat.updated" && chat.chat.status, "closed");
  assert.equal(updated.type === "message.updated" && updated.message.status, "read");
  assert.deepEqual(deleted.message, { id: removed.message_id, chat_id: removed.chat_id });
  assert.deepEqual(visitor.contents(), ["kept", "removed"]);
});

Deno.test("hub replay pushes only unpushed messages created within the window of the last notice", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, replayWindowMs: 1_000 });
  const visitor = await server.connect(app.id, clientId);
  const [old] = await sendMessages(db.sql, [[app.id, clientId, "old"]]);
  await delay(1_500);
  const [pushed] = await sendMessages(db.sql, [[app.id, clientId, "pushed"]]);
  // The last notice seen: the replay looks back 1 s from it, so "old" is out of its reach.
  await server.hub.handleNotice(
    JSON.stringify({ a: [app.id], m: [pushed.message_id, pushed.message_id] }),
  );
  await sendMessages(db.sql, [[app.id, clientId, "missed"]]);
  const [{ chat_id }] = await db.sql<{ chat_id: number }[]>`
    SELECT conversation_id AS chat_id FROM messages
    WHERE app_id = ${app.id} AND id = ${old.message_id}`;
  await insertInternalNote(db.sql, app.id, chat_id);

  await server.hub.replay();
  await waitUntil(() => visitor.contents().length === 2, "the replayed message");
  await delay(50);
  assert.deepEqual(visitor.contents(), ["pushed", "missed"]);
});

Deno.test("hub replay still owes a message to a socket attached after its notice", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  const bob = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql });
  const annSocket = await server.connect(app.id, ann);
  const sent = await sendMessages(db.sql, [[app.id, bob, "to Bob"], [app.id, ann, "to Ann"]]);
  // The notice reads both messages (the application has a socket); Bob has none yet.
  await server.hub.handleNotice(
    JSON.stringify({ a: [app.id], m: [sent[0].message_id, sent[1].message_id] }),
  );
  await waitUntil(() => annSocket.contents().length === 1, "Ann's message");
  const bobSocket = await server.connect(app.id, bob);
  await server.hub.replay();
  await waitUntil(() => bobSocket.contents().length === 1, "Bob's replayed message");
  await delay(50);
  assert.deepEqual(bobSocket.contents(), ["to Bob"]);
  assert.deepEqual(annSocket.contents(), ["to Ann"]);
});

/** `sql` whose transactions (a replay's one snapshot) fail while `failures()` says so. */
function failingTransactions(sql: Sql, failures: () => boolean): Sql {
  const wrapped =
    ((strings: TemplateStringsArray, ...values: unknown[]) =>
      sql(strings, ...(values as never[]))) as unknown as Sql;
  wrapped.begin =
    ((...args: Parameters<Sql["begin"]>) =>
      failures()
        ? Promise.reject(Object.assign(new Error("write CONNECTION_CLOSED"), {
          code: "CONNECTION_CLOSED",
        }))
        : sql.begin(...args)) as Sql["begin"];
  return wrapped;
}

Deno.test("hub replay reads again when its read fails, so what the outage held still arrives", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  let failing = 2;
  const flaky = failingTransactions(db.sql, () => failing-- > 0);
  await using server = await startHubServer({ sql: flaky });
  const visitor = await server.connect(app.id, clientId);
  await sendMessages(db.sql, [[app.id, clientId, "missed"]]);
  await server.hub.replay();
  await waitUntil(() => visitor.contents().length === 1, "the replayed message");
  assert.deepEqual(visitor.contents(), ["missed"]);
  assert.equal(visitor.closeCode(), null);
});

Deno.test("hub replay that cannot read closes the sockets that may have missed messages (1011)", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  const flaky = failingTransactions(db.sql, () => true);
  await using server = await startHubServer({ sql: flaky });
  const visitor = await server.connect(app.id, clientId);
  await sendMessages(db.sql, [[app.id, clientId, "missed"]]);
  await server.hub.replay();
  await waitUntil(() => visitor.closeCode() !== null, "the socket closed", 10_000);
  assert.equal(visitor.closeCode(), 1011);
  assert.deepEqual(visitor.contents(), []);
});

Deno.test("hub catches a socket attached late up on what its visitor got since, each message once", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, listenSql: db.sql });
  const first = await server.connect(app.id, ann);
  const since = new Date(Date.now() - 1_000);
  await sendMessages(db.sql, [[app.id, ann, "before the socket"]]);
  await waitUntil(() => first.contents().length === 1, "the first socket's message");
  // Attached once its token was looked up: the message went out before, to the other socket.
  const late = await server.connect(app.id, ann, since);
  await waitUntil(() => late.contents().length === 1, "the caught-up message");
  await sendMessages(db.sql, [[app.id, ann, "after"]]);
  await waitUntil(() => late.contents().length === 2, "the next message");
  await delay(50);
  assert.deepEqual(late.contents(), ["before the socket", "after"]);
  assert.deepEqual(first.contents(), ["before the socket", "after"]);
  assert.equal(late.frames[0].type, "chat.updated", "the conversation's state first");
});

Deno.test("hub sends a caught-up socket nothing twice when the notice of what it caught up on comes after", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  // No listener: notices arrive when the test hands them over.
  await using server = await startHubServer({ sql: db.sql });
  const since = new Date(Date.now() - 1_000);
  const [sent] = await sendMessages(db.sql, [[app.id, ann, "committed during the lookup"]]);
  const late = await server.connect(app.id, ann, since);
  await waitUntil(() => late.contents().length === 1, "the caught-up message");
  await server.hub.handleNotice(JSON.stringify({
    a: [app.id],
    m: [sent.message_id, sent.message_id],
    c: [[app.id, sent.chat_id]],
  }));
  await delay(50);
  assert.deepEqual(late.frames.map((frame) => frame.type), ["chat.updated", "message.created"]);
});

/** `sql` whose queries wait while its gate is shut; `shut()` returns what opens it again. */
function gated(sql: Sql) {
  let gate: Promise<void> = Promise.resolve();
  let calls = 0;
  const proxy = new Proxy(sql, {
    apply: (target, thisArg, args) => {
      calls++;
      return gate.then(() => Reflect.apply(target as never, thisArg, args) as Promise<unknown>);
    },
    // A transaction (a catch-up's one snapshot) counts as one read, and waits at the gate too.
    get: (target, property, receiver) => {
      if (property !== "begin") return Reflect.get(target, property, receiver);
      return (...args: unknown[]) => {
        calls++;
        return gate.then(() => Reflect.apply(target.begin, target, args));
      };
    },
  });
  return {
    sql: proxy,
    /** Queries and transactions begun so far. */
    get calls() {
      return calls;
    },
    shut(): () => void {
      const { promise, resolve } = Promise.withResolvers<void>();
      gate = promise;
      return resolve;
    },
  };
}

Deno.test("hub never sends a caught-up socket a state older than its catch-up's", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  const reads = gated(db.sql);
  await using server = await startHubServer({ sql: reads.sql });
  const watcher = await server.connect(app.id, ann); // so that the hub reads Ann's notices
  const since = new Date(Date.now() - 1_000);
  const [sent] = await sendMessages(db.sql, [[app.id, ann, "hello"]]);
  const opened = JSON.stringify({
    a: [app.id],
    m: [sent.message_id, sent.message_id],
    c: [[app.id, sent.chat_id]],
  });
  // The notice's reads wait; meanwhile a socket is attached late, so what they push is held.
  let open = reads.shut();
  const first = server.hub.handleNotice(opened);
  const late = await server.connect(app.id, ann, since);
  // They read the conversation open; then the catch-up's read waits while it is closed.
  const release = open;
  open = reads.shut();
  release();
  await delay(100);
  await commitBatch(db.sql, [{ kind: "chat.close", appId: app.id, chatId: sent.chat_id }]);
  const closed = server.hub.handleNotice(
    JSON.stringify({ a: [app.id], c: [[app.id, sent.chat_id]] }),
  );
  open();
  await Promise.all([first, closed]);
  await waitUntil(
    () => watcher.frames.filter((frame) => frame.type === "chat.updated").length === 2,
    "the watcher's open and closed states",
  );
  await delay(100);
  const states = late.frames.map((frame) =>
    frame.type === "chat.updated" ? `chat ${frame.chat.status}` : frame.type
  );
  assert.equal(states.filter((state) => state === "message.created").length, 1);
  assert.equal(
    states.filter((state) => state.startsWith("chat")).at(-1),
    "chat closed",
    states.join(),
  );
});

Deno.test("hub catches up the sockets attached late together with one read, each its own visitor's", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const visitors = await Promise.all([1, 2, 3].map(() => createVisitor(db.sql, app.id)));
  const reads = gated(db.sql);
  await using server = await startHubServer({ sql: reads.sql });
  await server.connect(app.id, visitors[0]); // so that the hub reads the application's notices
  const since = new Date(Date.now() - 1_000);
  const sent = await sendMessages(db.sql, visitors.map((v) => [app.id, v, `to ${v}`]));
  // A notice's reads hold the hub's turn while three sockets are attached late.
  const open = reads.shut();
  const notice = server.hub.handleNotice(JSON.stringify({
    a: [app.id],
    m: [sent[0].message_id, sent[0].message_id],
  }));
  const late = await Promise.all(visitors.map((v) => server.connect(app.id, v, since)));
  const before = reads.calls;
  open();
  await notice;
  for (const [i, socket] of late.entries()) {
    await waitUntil(() => socket.contents().length === 1, `visitor ${i}'s message`);
    assert.deepEqual(socket.contents(), [`to ${visitors[i]}`]);
  }
  // One catch-up read (one transaction) for the three sockets.
  assert.equal(reads.calls - before, 1);
});

Deno.test("hub skips sockets that close and forgets them", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  await using server = await startHubServer({ sql: db.sql, listenSql: db.sql });
  const leaving = await server.connect(app.id, clientId);
  const staying = await server.connect(app.id, clientId);
  assert.equal(server.hub.socketCount, 2);
  await leaving.close();
  await waitUntil(() => server.hub.socketCount === 1, "the closed socket to be detached");
  await sendMessages(db.sql, [[app.id, clientId, "hi"]]);
  await waitUntil(() => staying.contents().length === 1, "the message");
  assert.deepEqual(leaving.frames, []);
});

Deno.test("hub handleNotice returns at once without sockets and never rejects", async () => {
  await using db = await createTestDatabase();
  const errors: unknown[] = [];
  const hub = createRealtimeHub({ sql: db.sql, onError: (error) => errors.push(error) });
  await hub.handleNotice(JSON.stringify({ a: [1], m: [1, 2] }));
  await hub.handleNotice("not json");
  await hub.replay();
  assert.equal(errors.length, 1);
  assert.equal(hub.socketCount, 0);
  hub.stop();
});

Deno.test("createRealtimeHub rejects a negative replay window", async () => {
  await using db = await createTestDatabase();
  assert.throws(() => createRealtimeHub({ sql: db.sql, replayWindowMs: -1 }), RangeError);
});

Deno.test("hub handles a notice only after the ones before it, however long they take", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  // The hub's first query is held back: without serialization the second notice overtakes it.
  let calls = 0;
  const slowFirst = new Proxy(db.sql, {
    apply(target, self, args) {
      calls += 1;
      if (calls > 1) return Reflect.apply(target, self, args);
      return delay(300).then(() => Reflect.apply(target, self, args));
    },
  });
  await using server = await startHubServer({ sql: slowFirst });
  const visitor = await server.connect(app.id, clientId);
  const [first, second] = await sendMessages(db.sql, [
    [app.id, clientId, "1"],
    [app.id, clientId, "2"],
  ]);
  const notice = (id: number) => JSON.stringify({ a: [app.id], m: [id, id] });

  void server.hub.handleNotice(notice(first.message_id));
  await server.hub.handleNotice(notice(second.message_id));
  await waitUntil(() => visitor.contents().length === 2, "both messages");
  assert.deepEqual(visitor.contents(), ["1", "2"]);
});

Deno.test("hub reads a notice again when a read fails, so the message still reaches the socket", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  // The hub's reads, failing as a connection PostgreSQL ended mid-query would, while `failing`.
  let failing = 0;
  const flaky = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    if (failing > 0) {
      failing--;
      return Promise.reject(Object.assign(new Error("write CONNECTION_CLOSED"), {
        code: "CONNECTION_CLOSED",
      }));
    }
    return db.sql(strings, ...(values as never[]));
  }) as unknown as Sql;
  await using server = await startHubServer({ sql: flaky, listenSql: db.sql });
  const visitor = await server.connect(app.id, clientId);
  await sendMessages(db.sql, [[app.id, clientId, "first"]]);
  await waitUntil(() => visitor.frames.length === 2, "the first message");
  failing = 3;
  await sendMessages(db.sql, [[app.id, clientId, "second"]]);
  await sendMessages(db.sql, [[app.id, clientId, "third"]]);
  await waitUntil(
    () => visitor.frames.filter((frame) => frame.type === "message.created").length === 3,
    "every message",
  );
  const contents = visitor.frames.flatMap((frame) =>
    frame.type === "message.created" ? [frame.message.content] : []
  );
  assert.deepEqual(contents, ["first", "second", "third"], "in order");
});

Deno.test("hub reads the message-only notices that waited for its turn together, in order", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const clientId = await createVisitor(db.sql, app.id);
  // The hub's reads, held at a gate while `gate` is set, and counted.
  let gate: Promise<void> | null = null;
  let reads = 0;
  const gated = (async (strings: TemplateStringsArray, ...values: unknown[]) => {
    reads++;
    await gate;
    return await db.sql(strings, ...(values as never[]));
  }) as unknown as Sql;
  await using server = await startHubServer({ sql: gated, listenSql: db.sql });
  const visitor = await server.connect(app.id, clientId);
  await sendMessages(db.sql, [[app.id, clientId, "first"]]);
  await waitUntil(() => visitor.frames.length === 2, "the first message");
  const opened = Promise.withResolvers<void>();
  gate = opened.promise;
  reads = 0;
  // Five transactions: the first notice's read waits at the gate, the other four queue behind.
  for (const content of ["m1", "m2", "m3", "m4", "m5"]) {
    await sendMessages(db.sql, [[app.id, clientId, content]]);
  }
  await delay(200);
  opened.resolve();
  await waitUntil(
    () => visitor.frames.filter((frame) => frame.type === "message.created").length === 6,
    "every message",
  );
  const contents = visitor.frames.flatMap((frame) =>
    frame.type === "message.created" ? [frame.message.content] : []
  );
  assert.deepEqual(contents, ["first", "m1", "m2", "m3", "m4", "m5"]);
  assert.equal(reads, 2, "m1 alone, then m2..m5 in one read");
});

/**
 * A stand-in for a server-side WebSocket, to drive the states a real client cannot hold on
 * demand: an upgrade that never completes, a reader that never reads.
 */
class StandInSocket extends EventTarget {
  readyState: number = WebSocket.OPEN;
  bufferedAmount = 0;
  sent: string[] = [];
  closedWith: [number, string] | null = null;
  constructor(readyState: number = WebSocket.OPEN) {
    super();
    this.readyState = readyState;
  }
  send(data: string) {
    this.sent.push(data);
  }
  close(code: number, reason: string) {
    this.closedWith = [code, reason];
    this.readyState = WebSocket.CLOSING;
  }
  open() {
    this.readyState = WebSocket.OPEN;
    this.dispatchEvent(new Event("open"));
  }
  contents(): string[] {
    return this.sent.map((data) => JSON.parse(data)).filter((f) => f.type === "message.created")
      .map((f) => f.message.content);
  }
}

Deno.test("hub keeps frames for a socket in its upgrade, sends them in order when it opens, and forgets one that never opens", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  const hub = createRealtimeHub({ sql: db.sql, openDeadlineMs: 300 });
  try {
    const opening = new StandInSocket(WebSocket.CONNECTING);
    const stuck = new StandInSocket(WebSocket.CONNECTING);
    hub.attachVisitor(opening as unknown as WebSocket, { appId: app.id, clientId: ann });
    hub.attachVisitor(stuck as unknown as WebSocket, { appId: app.id, clientId: ann });
    const sent = await sendMessages(db.sql, [[app.id, ann, "one"], [app.id, ann, "two"]]);
    await hub.handleNotice(
      JSON.stringify({ a: [app.id], m: [sent[0].message_id, sent[1].message_id] }),
    );
    assert.deepEqual(opening.sent, []);
    opening.open();
    assert.deepEqual(opening.contents(), ["one", "two"]);
    assert.equal(hub.socketCount, 2);
    await waitUntil(() => hub.socketCount === 1, "the socket that never opened to be forgotten");
    const [third] = await sendMessages(db.sql, [[app.id, ann, "three"]]);
    await hub.handleNotice(
      JSON.stringify({ a: [app.id], m: [third.message_id, third.message_id] }),
    );
    assert.deepEqual(opening.contents(), ["one", "two", "three"]);
    stuck.open(); // Too late: nothing kept for it, nothing sent.
    assert.deepEqual(stuck.sent, []);
  } finally {
    hub.stop();
  }
});

Deno.test("hub closes a socket that leaves more than 1 MiB unread, and sends it nothing more", async () => {
  await using db = await createTestDatabase();
  const app = await insertApplication(db.sql, "Acme");
  const ann = await createVisitor(db.sql, app.id);
  const hub = createRealtimeHub({ sql: db.sql });
  try {
    const reading = new StandInSocket();
    const stalled = new StandInSocket();
    hub.attachVisitor(reading as unknown as WebSocket, { appId: app.id, clientId: ann });
    hub.attachVisitor(stalled as unknown as WebSocket, { appId: app.id, clientId: ann });
    const push = async (content: string) => {
      const [sent] = await sendMessages(db.sql, [[app.id, ann, content]]);
      await hub.handleNotice(
        JSON.stringify({ a: [app.id], m: [sent.message_id, sent.message_id] }),
      );
    };
    await push("first");
    stalled.bufferedAmount = 1_048_576;
    await push("second");
    assert.equal(stalled.closedWith, null, "at the limit it still gets frames");
    stalled.bufferedAmount = 1_048_577;
    await push("third");
    assert.deepEqual(stalled.closedWith, [1008, "Frames are not being read"]);
    await push("fourth");
    assert.deepEqual(stalled.contents(), ["first", "second"]);
    assert.deepEqual(reading.contents(), ["first", "second", "third", "fourth"]);
  } finally {
    hub.stop();
  }
});

Deno.test("hub holds at most 20 sockets per visitor: a new one closes the oldest", async () => {
  await using db = await createTestDatabase();
  const hub = createRealtimeHub({ sql: db.sql });
  try {
    const tabs = Array.from({ length: 21 }, () => new StandInSocket());
    for (const tab of tabs) {
      hub.attachVisitor(tab as unknown as WebSocket, { appId: 1, clientId: 7 });
    }
    assert.equal(hub.socketCount, 20);
    assert.deepEqual(tabs[0].closedWith, [1008, "Too many sockets for this visitor"]);
    assert.ok(tabs.slice(1).every((tab) => tab.closedWith === null));
    hub.attachVisitor(new StandInSocket() as unknown as WebSocket, { appId: 1, clientId: 8 });
    assert.equal(hub.socketCount, 21, "another visitor's sockets count apart");
  } finally {
    hub.stop();
  }
});
