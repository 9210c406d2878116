/**
 * The check that the secret box's key is the one this database's secrets were sealed with
 * (`key_check`, one row): sealed by the first instance to start, opened by every later one.
 */
import type { Tx } from "./client.ts";
import type { SecretBox } from "../crypto/secret_box.ts";

/** What the check seals. */
const PROBE = "parley key check";

/**
 * Resolves when `box` opens this database's key check (sealing it first when there is none);
 * throws a readable error when it does not.
 */
export async function checkEncryptionKey(sql: Tx, box: SecretBox): Promise<void> {
  await sql`
    INSERT INTO key_check (sealed) VALUES (${box.seal(PROBE)}) ON CONFLICT (id) DO NOTHING`;
  const [row] = await sql<{ sealed: string }[]>`SELECT sealed FROM key_check`;
  let opened: string | null = null;
  try {
    opened = box.open(row.sealed);
  } catch {
    // another key
  }
  if (opened !== PROBE) {
    throw new Error(
      "Invalid configuration: the encryption key is not the one this database's secrets were " +
        "sealed with (PARLEY_ENCRYPTION_KEY, or DATA_DIR/encryption_key)",
    );
  }
}
