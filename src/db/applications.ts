/** Queries of the `applications` table. */
import type { Tx } from "./client.ts";
import { randomHex } from "../crypto/tokens.ts";

/** An application as stored. */
export interface Application {
  id: number;
  name: string;
  public_id: string;
}

/** Creates an application with a fresh `app_<hex>` public id. */
export async function insertApplication(sql: Tx, name: string): Promise<Application> {
  const publicId = `app_${randomHex(12)}`;
  const [row] = await sql<Application[]>`
    INSERT INTO applications (name, public_id) VALUES (${name}, ${publicId})
    RETURNING id, name, public_id`;
  return row;
}

/** The application whose public id (used by the widget) is `publicId`, if any. */
export async function findApplicationByPublicId(
  sql: Tx,
  publicId: string,
): Promise<Application | null> {
  const [row] = await sql<Application[]>`
    SELECT id, name, public_id FROM applications WHERE public_id = ${publicId}`;
  return row ?? null;
}

/** The application with id `id`, if any. */
export async function findApplication(sql: Tx, id: number): Promise<Application | null> {
  const [row] = await sql<Application[]>`
    SELECT id, name, public_id FROM applications WHERE id = ${id}`;
  return row ?? null;
}
