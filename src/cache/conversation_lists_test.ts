import assert from "node:assert/strict";
import { createConversationListCache } from "./conversation_lists.ts";
import type { Conversation, ConversationStatus } from "../domain/conversation.ts";

function conversation(id: number): Conversation {
  return {
    id,
    client_id: 1,
    status: "open",
    channel: "web",
    last_message_at: "2026-11-22T01:27:40.123456Z",
    created_at: "2026-11-22T01:27:40.123456Z",
  };
}

/** A loader that answers `[conversation(version)]` and counts its calls. */
function fakeDatabase() {
  const db = {
    version: 1,
    loads: [] as [number, ConversationStatus | undefined][],
    load(appId: number, status: ConversationStatus | undefined) {
      db.loads.push([appId, status]);
      return Promise.resolve([conversation(db.version)]);
    },
  };
  return db;
}

Deno.test("createConversationListCache() serves a listing from memory until it is invalidated", async () => {
  const db = fakeDatabase();
  const cache = createConversationListCache({ load: db.load });
  assert.equal((await cache.get(1, undefined))[0].id, 1);
  db.version = 2;
  assert.equal((await cache.get(1, undefined))[0].id, 1, "served from memory");
  assert.equal(db.loads.length, 1);
  cache.invalidate(2);
  assert.equal((await cache.get(1, undefined))[0].id, 1, "another application's change");
  cache.invalidate(1);
  assert.equal((await cache.get(1, undefined))[0].id, 2);
  assert.equal(db.loads.length, 2);
});

Deno.test("createConversationListCache() keeps each status filter apart", async () => {
  const db = fakeDatabase();
  const cache = createConversationListCache({ load: db.load });
  await cache.get(1, undefined);
  await cache.get(1, "open");
  await cache.get(1, "closed");
  await cache.get(1, "open");
  assert.deepEqual(db.loads, [[1, undefined], [1, "open"], [1, "closed"]]);
});

Deno.test("createConversationListCache() never stores a load that raced with a change", async () => {
  let release!: () => void;
  let version = 1;
  const cache = createConversationListCache({
    load: async () => {
      const seen = version;
      await new Promise<void>((resolve) => release = resolve);
      return [conversation(seen)];
    },
  });
  const racing = cache.get(1, undefined);
  version = 2;
  cache.invalidate(1); // the change committed while the load ran on an older snapshot
  release();
  assert.equal((await racing)[0].id, 1, "the caller gets what it loaded");
  const next = cache.get(1, undefined);
  release();
  assert.equal((await next)[0].id, 2, "but it was not kept");

  const beforeClear = cache.get(3, undefined);
  cache.clear();
  release();
  await beforeClear;
  const afterClear = cache.get(3, undefined);
  release();
  assert.equal((await afterClear)[0].id, 2);
});

Deno.test("createConversationListCache() reloads an entry older than ttlMs and after clear()", async () => {
  const db = fakeDatabase();
  let clock = 0;
  const cache = createConversationListCache({ load: db.load, ttlMs: 100, now: () => clock });
  await cache.get(1, undefined);
  clock = 99;
  await cache.get(1, undefined);
  assert.equal(db.loads.length, 1);
  clock = 100;
  await cache.get(1, undefined);
  assert.equal(db.loads.length, 2);
  cache.clear();
  await cache.get(1, undefined);
  assert.equal(db.loads.length, 3);
});

Deno.test("createConversationListCache() forgets the least recently used application past maxApps", async () => {
  const db = fakeDatabase();
  const cache = createConversationListCache({ load: db.load, maxApps: 2 });
  await cache.get(1, undefined);
  await cache.get(2, undefined);
  await cache.get(1, undefined); // 1 is now the most recent
  await cache.get(3, undefined); // 2 goes
  await cache.get(1, undefined);
  assert.equal(db.loads.length, 3);
  await cache.get(2, undefined);
  assert.equal(db.loads.length, 4);
  assert.throws(() => createConversationListCache({ load: db.load, maxApps: 0 }), RangeError);
});
