import assert from "node:assert/strict";
import {
  pingDatabase,
  reconnectDelaySeconds,
  reserveWithin,
  splitSocketHost,
  type Sql,
} from "./client.ts";
import { isTransientDatabaseError } from "./transient_retry.ts";

Deno.test("splitSocketHost turns libpq's ?host=/dir into a socket path", () => {
  assert.deepEqual(splitSocketHost("postgres://u:p@127.0.0.1:5433/db?host=%2Ftmp%2Fpg"), {
    url: "postgres://u:p@127.0.0.1:5433/db",
    socketPath: "/tmp/pg/.s.PGSQL.5433",
  });
});

Deno.test("splitSocketHost leaves TCP URLs alone", () => {
  const url = "postgres://u:p@db.example.com:5432/db?sslmode=require";
  assert.deepEqual(splitSocketHost(url), { url, socketPath: null });
});

Deno.test("reserveWithin fails a reserve that never settles and releases one that comes late", async () => {
  const late = Promise.withResolvers<{ release(): void }>();
  let released = 0;
  const stuck = { reserve: () => late.promise } as unknown as Pick<Sql, "reserve">;
  await assert.rejects(() => reserveWithin(stuck, 20), (error: Error) => {
    assert.match(error.message, /No database connection came within 20 ms/);
    assert.ok(isTransientDatabaseError(error), "not reached: a retry may succeed");
    return true;
  });
  late.resolve({ release: () => void released++ });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(released, 1);

  const conn = { release: () => void released++ };
  const prompt = { reserve: () => Promise.resolve(conn) } as unknown as Pick<Sql, "reserve">;
  assert.equal(await reserveWithin(prompt, 20), conn);
  assert.equal(released, 1);
  const failing = { reserve: () => Promise.reject(new Error("down")) } as unknown as Pick<
    Sql,
    "reserve"
  >;
  await assert.rejects(() => reserveWithin(failing, 20), /down/);
});

Deno.test("pingDatabase fails after timeoutMs, or when the query fails", async () => {
  const failsLate =
    (() =>
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error("terminated")), 30)
      )) as unknown as Sql;
  await assert.rejects(() => pingDatabase(failsLate, 10), /Database did not answer in time/);
  await new Promise((resolve) => setTimeout(resolve, 50)); // its late failure stays handled
  const answers = (() => Promise.resolve([{ "?column?": 1 }])) as unknown as Sql;
  await pingDatabase(answers, 10);
  const refuses = (() => Promise.reject(new Error("refused"))) as unknown as Sql;
  await assert.rejects(() => pingDatabase(refuses, 1_000), /refused/);
});

Deno.test("reconnectDelaySeconds grows like postgres.js's but never past 2 s", () => {
  assert.equal(reconnectDelaySeconds(1, () => 1), 0.03);
  assert.equal(reconnectDelaySeconds(4, () => 1), 0.81);
  assert.equal(reconnectDelaySeconds(6, () => 1), 2, "postgres.js: 7.29");
  assert.equal(reconnectDelaySeconds(40, () => 0), 1);
});
