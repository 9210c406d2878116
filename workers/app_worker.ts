/**
 * The entry point of an actor worker thread: it owns a small database pool and one commit loop,
 * and turns the pool's `ask` messages into commands of that loop. Everything interesting lives
 * in `src/actors/app_commit_loop.ts` and `src/db/write_batch.ts`; this file only wires them up.
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { type CommitLoop, SHUTTING_DOWN } from "../src/actors/commit_loop.ts";
import { createAppCommitLoop } from "../src/actors/app_commit_loop.ts";
import type {
  AppCommand,
  CommandResult,
  FromWorker,
  Reply,
  ToWorker,
} from "../src/actors/protocol.ts";
import { connectWorkerPool, type Sql, warmUp } from "../src/db/client.ts";
import { commitBatch } from "../src/db/write_batch.ts";
import { setLogLevel } from "../src/log.ts";
import { guardWorkerThread } from "../src/thread_guards.ts";

let sql: Sql | null = null;
let loop: CommitLoop | null = null;

/**
 * How long a transaction may stay unsettled before the worker ends itself. postgres.js 3.4 can
 * lose a query whose connection the server ended (after the embedded PostgreSQL was killed, a
 * batch never settled and this worker never committed again); its pool then starts a fresh
 * worker, with a fresh database pool, and answers the commands in flight with a retryable 500 at
 * once.
 */
const STUCK_TRANSACTION_MS = 20_000;

/** `commitBatch` under the watchdog of {@linkcode STUCK_TRANSACTION_MS}. */
function commitWatched(pool: Sql, commands: AppCommand[]): Promise<CommandResult[]> {
  const watchdog = setTimeout(() => {
    const message =
      `A transaction did not settle within ${STUCK_TRANSACTION_MS} ms: ending the actor worker`;
    // Said first, so that the commands in flight are answered as retryable: the driver lost the
    // transaction, none of them hung it. The throw ends the worker should the message not.
    post({ type: "stuck", message });
    throw new Error(message);
  }, STUCK_TRANSACTION_MS);
  return commitBatch(pool, commands).finally(() => clearTimeout(watchdog));
}

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

guardWorkerThread("actor");

self.onmessage = async (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  switch (message.type) {
    case "init": {
      setLogLevel(message.logLevel);
      const pool = connectWorkerPool(message.databaseUrl, "parley-worker");
      sql = pool;
      // The loop takes asks at once (they may follow this message); its commits wait for this.
      const warm = warmUp(pool);
      loop = createAppCommitLoop(async (commands) => {
        await warm;
        return await commitWatched(pool, commands);
      });
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
