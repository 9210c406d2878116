import assert from "node:assert/strict";
import { splitSocketHost } from "./client.ts";

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
