/**
 * The entry point of an actor worker thread: it owns a small database pool and one commit loop,
 * and turns the pool's `ask` messages into commands of that loop. Everything interesting lives
 * in `src/actors/commit_loop.ts` and `src/db/write_batch.ts`; this file only wires them up.
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { type CommitLoop, createCommitLoop, SHUTTING_DOWN } from "../src/actors/commit_loop.ts";
import type { CommandResult, FromWorker, Reply, ToWorker } from "../src/actors/protocol.ts";
import { connectWorkerPool, type Sql } from "../src/db/client.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { describeError, log, setLogLevel } from "../src/log.ts";

let sql: Sql | null = null;
let loop: CommitLoop | null = null;

function post(message: FromWorker): void {
  self.postMessage(message);
}

/** Replies of this tick (a batch answers all its commands at once), sent in one message. */
let replies: Reply[] = [];

function reply(id: number, result: CommandResult): void {
  if (replies.length === 0) {
    queueMicrotask(() => {
      const message: FromWorker = { type: "reply", replies };
      replies = [];
      post(message);
    });
  }
  replies.push({ id, result });
}

// A rejection nobody awaited (a statement sent ahead in a transaction that already failed, say)
// is logged, not left to end the thread: the work it belonged to has failed and been answered.
self.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  log("error", "unhandled rejection in the actor worker", describeError(event.reason));
});

// postgres.js can throw from a timer when PostgreSQL ended a connection under a write in
// progress (`nextWrite` on a socket already gone). That connection is lost either way and the
// pool opens another; the thread, with every other batch it is committing, is kept. Any other
// uncaught error still ends the thread, which the pool replaces.
self.addEventListener("error", (event) => {
  if (!/\/postgres\/src\/connection\.js/.test(String(event.error?.stack ?? ""))) return;
  event.preventDefault();
  log("error", "database driver error in the actor worker", describeError(event.error));
});

self.onmessage = async (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  switch (message.type) {
    case "init": {
      setLogLevel(message.logLevel);
      const pool = connectWorkerPool(message.databaseUrl, "parley-worker");
      sql = pool;
      loop = createCommitLoop({ commit: (commands) => commitBatch(pool, commands) });
      post({ type: "ready" });
      break;
    }
    case "ask": {
      for (const { id, key, command } of message.asks) {
        if (loop) void loop.submit(key, command).then((result) => reply(id, result));
        else reply(id, SHUTTING_DOWN);
      }
      break;
    }
    case "stop": {
      await loop?.stop();
      await sql?.end();
      post({ type: "stopped" });
      break;
    }
  }
};
