/** Queries of the `flows` table: at most one validated Flow per application. */
import type { Tx } from "./client.ts";
import type { Flow } from "../domain/flow.ts";

/** The Flow of an application, or null when it has none. */
export async function findFlow(sql: Tx, appId: number): Promise<Flow | null> {
  const [row] = await sql<{ definition: Flow }[]>`
    SELECT definition FROM flows WHERE app_id = ${appId}`;
  return row?.definition ?? null;
}

/**
 * Stores an application's Flow, replacing the one it had; `null` removes it. Conversations
 * waiting on a node of the old Flow go on with the new one when it has that node and button.
 */
export async function replaceFlow(sql: Tx, appId: number, flow: Flow | null): Promise<Flow | null> {
  if (flow === null) {
    await sql`DELETE FROM flows WHERE app_id = ${appId}`;
    return null;
  }
  const [row] = await sql<{ definition: Flow }[]>`
    INSERT INTO flows (app_id, definition) VALUES (${appId}, ${JSON.stringify(flow)}::text::json)
    ON CONFLICT (app_id) DO UPDATE SET definition = EXCLUDED.definition,
      updated_at = clock_timestamp()
    RETURNING definition`;
  return row.definition;
}
