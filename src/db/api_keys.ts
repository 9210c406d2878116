/**
 * Queries of the `api_keys` table. Keys are stored as SHA-256 hashes with a display prefix,
 * so the table grants nothing when it leaks; the plaintext exists only in `key:create`'s output.
 */
import type { Sql, Tx } from "./client.ts";

/** Most active (unrevoked) keys an application may hold (SPEC §8). */
export const MAX_ACTIVE_API_KEYS = 10;

/** A key as listed: never the key itself. */
export interface ApiKeyListing {
  id: number;
  name: string | null;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** A new key's row: what to store. */
export interface NewApiKey {
  appId: number;
  name: string | null;
  keyHash: Uint8Array;
  prefix: string;
}

/**
 * Stores a key unless the application already has {@linkcode MAX_ACTIVE_API_KEYS} active ones;
 * returns its id, or null at the limit. The application row is locked first, so concurrent
 * creations count each other.
 */
export async function insertApiKey(sql: Sql, key: NewApiKey): Promise<number | null> {
  return await sql.begin(async (tx) => {
    await tx`SELECT 1 FROM applications WHERE id = ${key.appId} FOR UPDATE`;
    // A new statement: in READ COMMITTED it sees keys committed while it waited for the lock.
    const [row] = await tx<{ id: number }[]>`
      INSERT INTO api_keys (app_id, name, key_hash, prefix)
      SELECT ${key.appId}, ${key.name}, ${key.keyHash}, ${key.prefix}
      WHERE (SELECT count(*) FROM api_keys WHERE app_id = ${key.appId} AND revoked_at IS NULL)
        < ${MAX_ACTIVE_API_KEYS}
      RETURNING id`;
    return row?.id ?? null;
  });
}

/** Every key of an application, oldest first. */
export async function listApiKeys(sql: Tx, appId: number): Promise<ApiKeyListing[]> {
  return await sql<ApiKeyListing[]>`
    SELECT id, name, prefix, created_at, last_used_at, revoked_at
    FROM api_keys WHERE app_id = ${appId} ORDER BY id`;
}

/**
 * Revokes a key of an application (revoking a revoked key keeps its first revocation time);
 * null when the application has no such key.
 */
export async function revokeApiKey(
  sql: Tx,
  appId: number,
  id: number,
): Promise<{ id: number; revoked_at: string } | null> {
  const [row] = await sql<{ id: number; revoked_at: string }[]>`
    UPDATE api_keys SET revoked_at = coalesce(revoked_at, clock_timestamp())
    WHERE app_id = ${appId} AND id = ${id}
    RETURNING id, revoked_at`;
  return row ?? null;
}

/** An active key, as authentication needs it. */
export interface ActiveApiKey {
  keyId: number;
  appId: number;
}

/**
 * The active key with hash `keyHash`, or null when it is unknown or revoked. It also stamps
 * `last_used_at`, at most once a minute per key whatever the number of instances asking.
 */
export async function findActiveApiKey(
  sql: Tx,
  keyHash: Uint8Array,
): Promise<ActiveApiKey | null> {
  const [row] = await sql<{ id: number; app_id: number }[]>`
    WITH key AS (
      SELECT id, app_id, last_used_at FROM api_keys
      WHERE key_hash = ${keyHash} AND revoked_at IS NULL
    ), touched AS (
      UPDATE api_keys k SET last_used_at = clock_timestamp()
      FROM key
      WHERE k.id = key.id
        AND (k.last_used_at IS NULL OR k.last_used_at < clock_timestamp() - interval '1 minute')
    )
    SELECT id, app_id FROM key`;
  return row ? { keyId: row.id, appId: row.app_id } : null;
}
