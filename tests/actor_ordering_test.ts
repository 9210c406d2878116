import assert from "node:assert/strict";
import { createActorPool } from "../src/actors/pool.ts";
import { appActorKey, type AppCommand } from "../src/actors/protocol.ts";
import { createTestDatabase } from "./support/database.ts";

interface Visitor {
  appId: number;
  clientId: number;
  /** Contents in the order they were asked. */
  asked: string[];
}

Deno.test("actor pool stores each visitor's concurrent messages in the order they were asked", async () => {
  await using db = await createTestDatabase();
  const sql = db.sql;
  const appIds: number[] = [];
  for (const name of ["Ordering A", "Ordering B"]) {
    const [app] = await sql<{ id: string }[]>`
      INSERT INTO applications (public_id, name) VALUES (${crypto.randomUUID()}, ${name})
      RETURNING id`;
    appIds.push(Number(app.id));
  }
  const visitors: Visitor[] = [];
  for (const appId of [appIds[0], appIds[0], appIds[0], appIds[1], appIds[1]]) {
    const [client] = await sql<{ id: string }[]>`
      INSERT INTO clients (app_id, name) VALUES (${appId}, 'Visitor') RETURNING id`;
    visitors.push({ appId, clientId: Number(client.id), asked: [] });
  }

  const pool = await createActorPool({ size: 2, databaseUrl: db.url });
  try {
    // A fixed pseudo-random interleaving of the five visitors, all asked at once.
    let seed = 7;
    const asks = Array.from({ length: 200 }, (_, n) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      const visitor = visitors[seed % visitors.length];
      const content = `message ${n}`;
      visitor.asked.push(content);
      const command: AppCommand = {
        kind: "visitor.message",
        appId: visitor.appId,
        clientId: visitor.clientId,
        messageType: "text",
        content,
      };
      return { visitor, content, answer: pool.ask(appActorKey(visitor.appId), command) };
    });
    const results = await Promise.all(asks.map((ask) => ask.answer));
    results.forEach((result, n) => assert.ok(result.ok, `ask ${n}: ${JSON.stringify(result)}`));

    for (const visitor of visitors) {
      assert.ok(visitor.asked.length > 0);
      const answered = asks.flatMap((ask, n) => {
        if (ask.visitor !== visitor) return [];
        const value = (results[n] as { value: { chat_id: unknown; message_id: unknown } }).value;
        return [{ chatId: Number(value.chat_id), messageId: Number(value.message_id) }];
      });
      const ids = answered.map((answer) => answer.messageId);
      assert.deepEqual(ids, [...ids].sort((a, b) => a - b), "message ids ascend in ask order");
      assert.equal(new Set(answered.map((answer) => answer.chatId)).size, 1, "one conversation");

      const stored = await sql<{ id: string; content: string }[]>`
        SELECT m.id, m.content
        FROM messages m
        JOIN conversations c ON c.app_id = m.app_id AND c.id = m.conversation_id
        WHERE m.app_id = ${visitor.appId} AND c.client_id = ${visitor.clientId}
        ORDER BY m.id`;
      assert.deepEqual(stored.map((row) => row.content), visitor.asked, "stored in ask order");
      assert.deepEqual(stored.map((row) => Number(row.id)), ids);
    }
  } finally {
    await pool.stop();
  }
});
