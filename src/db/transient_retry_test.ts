import assert from "node:assert/strict";
import postgres from "postgres";
import { isTransientDatabaseError, retryingTransient } from "./transient_retry.ts";

function postgresError(code: string): Error {
  return new postgres.PostgresError({ code, message: `error ${code}` } as never);
}

const closed = Object.assign(new Error("write CONNECTION_CLOSED /tmp/.s.PGSQL.5432"), {
  code: "CONNECTION_CLOSED",
});

Deno.test("isTransientDatabaseError() tells an unreachable database from a refused statement", () => {
  assert.equal(isTransientDatabaseError(closed), true);
  assert.equal(
    isTransientDatabaseError(Object.assign(new Error("x"), { code: "ECONNREFUSED" })),
    true,
  );
  assert.equal(isTransientDatabaseError(postgresError("57P01")), true, "admin shutdown");
  assert.equal(isTransientDatabaseError(postgresError("57P03")), true, "starting up");
  assert.equal(isTransientDatabaseError(postgresError("08006")), true, "connection failure");
  assert.equal(isTransientDatabaseError(postgresError("23505")), false, "unique violation");
  assert.equal(isTransientDatabaseError(postgresError("57014")), false, "statement cancelled");
  assert.equal(isTransientDatabaseError(new TypeError("a bug")), false);
  const coded = (code: string) => Object.assign(new Error(code), { code });
  assert.equal(isTransientDatabaseError(coded("CONNECTION_ENDED")), false, "the pool was ended");
  assert.equal(isTransientDatabaseError(coded("UNDEFINED_VALUE")), false, "a bug");
  assert.equal(isTransientDatabaseError("not an error"), false);
});

Deno.test("retryingTransient() tries again while the database is away, and only then", async () => {
  const slept: number[] = [];
  const sleep = (ms: number) => (slept.push(ms), Promise.resolve());
  let calls = 0;
  const value = await retryingTransient(
    () => {
      calls++;
      return calls < 4 ? Promise.reject(closed) : Promise.resolve("recorded");
    },
    60_000,
    sleep,
  );
  assert.equal(value, "recorded");
  assert.deepEqual(slept, [200, 500, 1_000]);

  calls = 0;
  await assert.rejects(
    retryingTransient(() => (calls++, Promise.reject(postgresError("23505"))), 60_000, sleep),
    /23505/,
  );
  assert.equal(calls, 1, "a refused statement is not tried again");

  calls = 0;
  await assert.rejects(
    retryingTransient(() => (calls++, Promise.reject(closed)), 1_000, sleep),
    /CONNECTION_CLOSED/,
  );
  assert.equal(calls, 3, "tries until the next pause would pass the deadline");
});
