/**
 * The first page of each application's conversation listing, kept in memory so that polling
 * integrations (`GET /conversations`, the Open API's hottest read) cost no database round trip.
 * Every write that changes an application's conversations ends in a change notice, and the
 * instance that committed it also drops the entry before it answers: this instance reads its own
 * writes, and other instances see them once the notice arrives (the LISTEN latency, milliseconds).
 * A load that raced with a change is never stored, a reconnect of the LISTEN connection drops
 * everything, and an entry lives at most `ttlMs` in case a notice was lost.
 */
import type { Conversation, ConversationStatus } from "../domain/conversation.ts";

/** Rows kept per listing: the largest page (50) and one more to know whether more exist. */
export const CACHED_ROWS = 51;

/** Loads the newest {@linkcode CACHED_ROWS} conversations of a listing from the database. */
export type LoadListing = (
  appId: number,
  status: ConversationStatus | undefined,
) => Promise<Conversation[]>;

/** Options of {@linkcode createConversationListCache}. */
export interface ConversationListCacheOptions {
  load: LoadListing;
  /** Longest an entry is served, in milliseconds. @default 5_000 */
  ttlMs?: number;
  /** Most applications kept (least recently used go first). @default 1_000 */
  maxApps?: number;
  /** The clock, in milliseconds. @default performance.now */
  now?: () => number;
}

/** The cache returned by {@linkcode createConversationListCache}. */
export interface ConversationListCache {
  /** The newest {@linkcode CACHED_ROWS} conversations of a listing, from memory when fresh. */
  get(appId: number, status: ConversationStatus | undefined): Promise<Conversation[]>;
  /** Forgets the listings of an application (its conversations changed). */
  invalidate(appId: number): void;
  /** Forgets everything (change notices may have been missed). */
  clear(): void;
}

interface AppEntry {
  /** Bumped by every invalidation: a load started under an older one is not stored. */
  generation: number;
  listings: Map<string, { rows: Conversation[]; storedAt: number }>;
}

/** Creates an empty cache. */
export function createConversationListCache(
  options: ConversationListCacheOptions,
): ConversationListCache {
  const { load, ttlMs = 5_000, maxApps = 1_000, now = () => performance.now() } = options;
  if (!(ttlMs >= 0)) throw new RangeError(`Cannot create cache: ttlMs must be >= 0, got ${ttlMs}`);
  if (!Number.isInteger(maxApps) || maxApps < 1) {
    throw new RangeError(`Cannot create cache: maxApps must be a positive integer, got ${maxApps}`);
  }
  const apps = new Map<number, AppEntry>();
  let epoch = 0;

  function entryOf(appId: number): AppEntry {
    let entry = apps.get(appId);
    if (entry) {
      apps.delete(appId); // re-inserted below: most recently used last
    } else {
      entry = { generation: 0, listings: new Map() };
    }
    apps.set(appId, entry);
    if (apps.size > maxApps) apps.delete(apps.keys().next().value!);
    return entry;
  }

  return {
    async get(appId, status) {
      const entry = entryOf(appId);
      const key = status ?? "";
      const cached = entry.listings.get(key);
      if (cached && now() - cached.storedAt < ttlMs) return cached.rows;
      const { generation } = entry;
      const startedEpoch = epoch;
      const startedAt = now();
      const rows = await load(appId, status);
      // Store only if nothing changed since the load began (its snapshot may predate a change).
      if (
        entry.generation === generation && epoch === startedEpoch && apps.get(appId) === entry
      ) {
        entry.listings.set(key, { rows, storedAt: startedAt });
      }
      return rows;
    },
    invalidate(appId) {
      const entry = apps.get(appId);
      if (!entry) return;
      entry.generation++;
      entry.listings.clear();
    },
    clear() {
      epoch++;
      apps.clear();
    },
  };
}
