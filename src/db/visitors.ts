/**
 * Web visitors: clients of an application known on the `web` channel by the SHA-256 of their
 * visitor token. The token itself is never stored.
 */
import type { Tx } from "./client.ts";

/** Creates a client with a `web` identity; returns its id. */
export async function insertVisitor(
  sql: Tx,
  visitor: { appId: number; tokenHash: string; name: string | null; email: string | null },
): Promise<number> {
  const [row] = await sql<{ id: number }[]>`
    WITH client AS (
      INSERT INTO clients (app_id, name, email)
      VALUES (${visitor.appId}, ${visitor.name}, ${visitor.email})
      RETURNING id
    ), identity AS (
      INSERT INTO client_identities (app_id, channel, external_id, client_id)
      SELECT ${visitor.appId}, 'web', ${visitor.tokenHash}, id FROM client
    )
    SELECT id FROM client`;
  return row.id;
}

/** The client id behind a visitor token hash of application `appId`, if any. */
export async function findVisitorByTokenHash(
  sql: Tx,
  appId: number,
  tokenHash: string,
): Promise<number | null> {
  const [row] = await sql<{ client_id: number }[]>`
    SELECT client_id FROM client_identities
    WHERE app_id = ${appId} AND channel = 'web' AND external_id = ${tokenHash}`;
  return row?.client_id ?? null;
}
