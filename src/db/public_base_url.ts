/**
 * Where the running servers are reached (`public_base_url`, one row), recorded by each server as
 * it starts, for the links the CLI prints.
 */
import type { Tx } from "./client.ts";

/** Records `url` as where Parley is reached. */
export async function recordPublicBaseUrl(sql: Tx, url: string): Promise<void> {
  await sql`
    INSERT INTO public_base_url (url) VALUES (${url})
    ON CONFLICT (id) DO UPDATE SET url = excluded.url, updated_at = excluded.updated_at`;
}

/** Where the last server to start said Parley is reached; null when none has started. */
export async function findPublicBaseUrl(sql: Tx): Promise<string | null> {
  const [row] = await sql<{ url: string }[]>`SELECT url FROM public_base_url`;
  return row?.url ?? null;
}
