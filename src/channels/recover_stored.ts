/**
 * Recovery of the platform requests that were stored and acknowledged but never applied (a crash
 * came between), page by page until none is left. A page is handed over whole at once: the
 * processors keep each application's (each workspace's) requests in the order they were handed
 * over, and bound how many are in flight, so that a backlog left by a crash drains at the pace of
 * the live path rather than one request at a time. The run at start holds the live requests back
 * (a {@linkcode LiveGate}) until it has handed over the last of them: a customer's message
 * acknowledged just after a restart must not be applied before the older ones a crash left.
 */
import type { Sql } from "../db/client.ts";
import {
  recoveryBound,
  type StoredRequestKey,
  type StoredRequestPage,
} from "../db/stored_requests.ts";
import { ApplyDeferredError } from "./ordered_apply.ts";

/** Requests read per page: their bodies are held in memory until the page is applied. */
export const RECOVERY_PAGE_SIZE = 100;

/** What a recovery run is given. */
export interface RecoveryOptions {
  /** Only requests received at least this long ago, by the database's clock. @default 60 */
  olderThanSeconds?: number;
  /**
   * Live requests wait until the run has handed over every request it found (the run at start,
   * before the server listens). @default false
   */
  holdLive?: boolean;
}

/** Options of {@linkcode recoverInPages}. */
export interface RecoverInPagesOptions {
  /** Called once the last page was handed to `apply` (before it is applied). @default none */
  onLastHandedOver?: () => void;
}

/**
 * Reads pages with `findPage` (each after the last key of the one before) and applies each
 * request with `apply`, which must not reject; resolves to how many it found.
 */
export async function recoverInPages<T extends StoredRequestKey>(
  findPage: (after: StoredRequestKey | undefined) => Promise<T[]>,
  apply: (request: T) => Promise<void>,
  { onLastHandedOver }: RecoverInPagesOptions = {},
): Promise<number> {
  let after: StoredRequestKey | undefined;
  let found = 0;
  for (;;) {
    const page = await findPage(after);
    const applied = Promise.all(page.map(apply));
    const last = page.length < RECOVERY_PAGE_SIZE;
    if (last) onLastHandedOver?.();
    await applied;
    found += page.length;
    if (last) return found;
    after = page[page.length - 1];
  }
}

/** Where {@linkcode recoverStored} finds stored requests and what it does with them. */
export interface StoredRequestSource<T> {
  /** Reads a page of requests not applied yet. */
  find: (sql: Sql, page: StoredRequestPage) => Promise<T[]>;
  /**
   * Applies a request; must not reject, and must hand it over to its order synchronously (before
   * its first `await`), so that what the live gate lets through afterwards comes behind it.
   */
  apply: (request: T) => Promise<void>;
  /** The gate of the processor's live requests. */
  liveGate: LiveGate;
}

/**
 * Recovers the stored requests `source` pages through: those received over `olderThanSeconds`
 * ago (by the database's clock, the bound fixed now); resolves to how many it found. With
 * `holdLive`, the live gate closes at once (before this returns) and opens once the last page is
 * handed over, or the run failed.
 */
export async function recoverStored<T extends StoredRequestKey>(
  sql: Sql,
  source: StoredRequestSource<T>,
  { olderThanSeconds = 60, holdLive = false }: RecoveryOptions = {},
): Promise<number> {
  const open = holdLive ? source.liveGate.close() : undefined;
  try {
    const before = await recoveryBound(sql, olderThanSeconds);
    return await recoverInPages(
      (after) => source.find(sql, { before, after, limit: RECOVERY_PAGE_SIZE }),
      source.apply,
      { onLastHandedOver: open },
    );
  } finally {
    open?.();
  }
}

/** Live requests held back while a recovery hands over the requests stored before them. */
export interface LiveGate {
  /**
   * Resolves once a live request of `bytes` may be handed over: at once while the gate is open
   * and nobody waits. Rejects with an {@linkcode ApplyDeferredError} (the request stays stored,
   * for a later recovery) when `maxWaiting` requests already wait, or it would take the bytes
   * waiting past `maxWaitingBytes` (one alone always waits).
   */
  pass(bytes?: number): Promise<void>;
  /**
   * Closes the gate until the function returned is called (again: no effect), or `maxHoldMs`
   * passed.
   */
  close(): () => void;
}

/** Options of {@linkcode createLiveGate}. */
export interface LiveGateOptions {
  /** Most live requests waiting at once (their bodies are in memory). @default 30_000 */
  maxWaiting?: number;
  /**
   * Most bytes of their bodies waiting at once (a WhatsApp delivery can be megabytes).
   * @default 256 MiB
   */
  maxWaitingBytes?: number;
  /**
   * Longest a close holds the gate: past it, a recovery that hangs (a lost connection, a page
   * that never comes) no longer holds back every live request. @default 60_000
   */
  maxHoldMs?: number;
  /** Called when a close outlived `maxHoldMs`. @default none */
  onExpired?: () => void;
}

/**
 * Waiters let through per turn of the event loop once the gate opens: each then prepares its
 * request (parses its body) at once, and thousands in one turn would stall the acknowledgements.
 */
const PASSED_PER_TURN = 64;

/** Creates an open gate. Requests waiting at it pass in the order they came. */
export function createLiveGate(options: LiveGateOptions = {}): LiveGate {
  const { maxWaiting = 30_000, maxWaitingBytes = 256 * 1024 * 1024 } = options;
  const { maxHoldMs = 60_000, onExpired = () => {} } = options;
  let closers = 0;
  /** The waiters' resolvers and sizes, in arrival order, from `head` on. */
  let waiting: { resolve: () => void; bytes: number }[] = [];
  let head = 0;
  let waitingBytes = 0;
  let draining = false;

  function drain(): void {
    draining = false;
    if (closers > 0) return;
    const end = Math.min(waiting.length, head + PASSED_PER_TURN);
    while (head < end) {
      const waiter = waiting[head++];
      waitingBytes -= waiter.bytes;
      waiter.resolve();
    }
    if (head < waiting.length) {
      draining = true;
      setTimeout(drain, 0);
    } else {
      waiting = [];
      head = 0;
    }
  }

  return {
    pass(bytes = 0) {
      const count = waiting.length - head;
      if (closers === 0 && count === 0) return Promise.resolve();
      if (count >= maxWaiting || (count > 0 && waitingBytes + bytes > maxWaitingBytes)) {
        return Promise.reject(
          new ApplyDeferredError("Too many live requests held back behind the recovery"),
        );
      }
      waitingBytes += bytes;
      return new Promise<void>((resolve) => waiting.push({ resolve, bytes }));
    },
    close() {
      closers++;
      let opened = false;
      const expiry = setTimeout(() => {
        onExpired();
        open();
      }, maxHoldMs);
      function open(): void {
        if (opened) return;
        opened = true;
        clearTimeout(expiry);
        if (--closers === 0 && !draining) drain();
      }
      return open;
    },
  };
}
