/**
 * The process's one LISTEN on the change channel. postgres.js runs `sql.listen` on a
 * dedicated connection of its own (one per pool, whatever the pool's size) and, when that
 * connection drops, reconnects and listens again by itself; notices committed meanwhile are
 * lost, so every listen after the first is reported as a reconnect for the hub to replay.
 */
import type { Sql } from "../db/client.ts";
import { CHANGES_CHANNEL } from "../domain/change_notice.ts";
import { describeError, log } from "../log.ts";

/** Options of {@linkcode listenForChanges}. */
export interface ListenForChangesOptions {
  /** The pool whose dedicated LISTEN connection is used. */
  sql: Sql;
  /** Receives each NOTIFY payload of the change channel, in the order sent. */
  onNotice(payload: string): void;
  /**
   * Called each time the LISTEN is back after its connection dropped, before any payload
   * received on the new connection.
   */
  onReconnect(): void;
  /** Receives what `onNotice` or `onReconnect` threw. @default one JSON error log line */
  onError?: (error: unknown) => void;
}

/** A running listener. */
export interface ChangeListener {
  /** Stops listening; no callback runs after it resolves. */
  stop(): Promise<void>;
}

/** Listens on the change channel; resolves once the first LISTEN is in place. */
export async function listenForChanges(options: ListenForChangesOptions): Promise<ChangeListener> {
  const { sql, onNotice, onReconnect, onError = reportError } = options;
  const pending: string[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let listens = 0;
  let stopped = false;

  function call(callback: () => void): void {
    try {
      callback();
    } catch (error) {
      // A throw inside postgres.js's notification handler would break the connection.
      onError(error);
    }
  }

  function deliver(): void {
    timer = undefined;
    for (const payload of pending.splice(0)) {
      if (!stopped) call(() => onNotice(payload));
    }
  }

  const { unlisten } = await sql.listen(
    CHANGES_CHANNEL,
    (payload) => {
      if (stopped) return;
      // Payloads that arrive with the LISTEN's reply are handled before postgres.js calls
      // onListen (a microtask later); deferring them by a task puts onReconnect first, so
      // the hub's replay window starts before the outage, not at its first new notice.
      pending.push(payload);
      timer ??= setTimeout(deliver, 0);
    },
    () => {
      listens += 1;
      if (listens > 1 && !stopped) call(onReconnect);
    },
  );

  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      pending.length = 0;
      await unlisten();
    },
  };
}

function reportError(error: unknown): void {
  log("error", "Change listener callback failed", describeError(error));
}
