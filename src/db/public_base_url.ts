/**
 * Where the running servers are reached (`public_base_url`, one row), recorded by each server as
 * it starts, for the links the CLI prints.
 */
import type { Tx } from "./client.ts";

/**
 * Records `url` as where Parley is reached: `explicit` when a server's `PUBLIC_BASE_URL` says so,
 * else a guess (localhost and its port), which never replaces an explicit one — a debugging
 * instance started against the same database does not redirect the links.
 */
export async function recordPublicBaseUrl(
  sql: Tx,
  url: string,
  explicit: boolean,
): Promise<void> {
  await sql`
    INSERT INTO public_base_url (url, explicit) VALUES (${url}, ${explicit})
    ON CONFLICT (id) DO UPDATE
      SET url = excluded.url, explicit = excluded.explicit, updated_at = excluded.updated_at
      WHERE excluded.explicit OR NOT public_base_url.explicit`;
}

/** Where the last server to start said Parley is reached; null when none has started. */
export async function findPublicBaseUrl(sql: Tx): Promise<string | null> {
  const [row] = await sql<{ url: string }[]>`SELECT url FROM public_base_url`;
  return row?.url ?? null;
}
