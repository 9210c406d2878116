/**
 * Recovery of the platform requests that were stored and acknowledged but never applied (a crash
 * came between), page by page until none is left. A page is handed over whole at once: the
 * processors keep each application's (each workspace's) requests in the order they were handed
 * over, and bound how many are in flight, so that a backlog left by a crash drains at the pace of
 * the live path rather than one request at a time.
 */
import type { Sql } from "../db/client.ts";
import {
  recoveryBound,
  type StoredRequestKey,
  type StoredRequestPage,
} from "../db/stored_requests.ts";

/** Requests read per page: their bodies are held in memory until the page is applied. */
export const RECOVERY_PAGE_SIZE = 100;

/** What a recovery run is given. */
export interface RecoveryOptions {
  /** Only requests received at least this long ago, by the database's clock. @default 60 */
  olderThanSeconds?: number;
}

/**
 * Reads pages with `findPage` (each after the last key of the one before) and applies each
 * request with `apply`, which must not reject; resolves to how many it found.
 */
export async function recoverInPages<T extends StoredRequestKey>(
  findPage: (after: StoredRequestKey | undefined) => Promise<T[]>,
  apply: (request: T) => Promise<void>,
): Promise<number> {
  let after: StoredRequestKey | undefined;
  let found = 0;
  for (;;) {
    const page = await findPage(after);
    await Promise.all(page.map(apply));
    found += page.length;
    if (page.length < RECOVERY_PAGE_SIZE) return found;
    after = page[page.length - 1];
  }
}

/**
 * Recovers the stored requests `find` pages through: those received over `olderThanSeconds` ago
 * (by the database's clock, the bound fixed now), each handed to `apply`, which must not reject;
 * resolves to how many it found.
 */
export async function recoverStored<T extends StoredRequestKey>(
  sql: Sql,
  find: (sql: Sql, page: StoredRequestPage) => Promise<T[]>,
  apply: (request: T) => Promise<void>,
  { olderThanSeconds = 60 }: RecoveryOptions = {},
): Promise<number> {
  const before = await recoveryBound(sql, olderThanSeconds);
  return await recoverInPages(
    (after) => find(sql, { before, after, limit: RECOVERY_PAGE_SIZE }),
    apply,
  );
}
