/**
 * The check that the secret box's key is the one this database's secrets were sealed with
 * (`key_check`, one row): sealed by the first instance to start, opened by every later one.
 */
import type { Tx } from "./client.ts";
import type { SecretBox } from "../crypto/secret_box.ts";

/** What the check seals. */
const PROBE = "parley key check";

const WRONG_KEY = "Invalid configuration: the encryption key is not the one this database's " +
  "secrets were sealed with (PARLEY_ENCRYPTION_KEY, or DATA_DIR/encryption_key)";

/**
 * Resolves when `box` opens this database's key check; throws a readable error when it does not.
 * Where there is no check yet, it is sealed — once `box` opens a secret the database holds
 * already, if any: a database secrets were sealed in before the check existed (migration 0009)
 * must not take the first key it is given.
 */
export async function checkEncryptionKey(sql: Tx, box: SecretBox): Promise<void> {
  const [existing] = await sql<{ sealed: string }[]>`SELECT sealed FROM key_check`;
  if (!existing) {
    const [secret] = await sql<{ sealed: string }[]>`
      SELECT sealed FROM (
        (SELECT secret_encrypted AS sealed FROM webhooks LIMIT 1)
        UNION ALL (SELECT access_token_sealed FROM whatsapp_channels LIMIT 1)
        UNION ALL (SELECT bot_token_sealed FROM slack_installations LIMIT 1)
      ) secrets LIMIT 1`;
    if (secret && !opens(box, secret.sealed)) throw new Error(WRONG_KEY);
    await sql`
      INSERT INTO key_check (sealed) VALUES (${box.seal(PROBE)}) ON CONFLICT (id) DO NOTHING`;
  }
  const [row] = await sql<{ sealed: string }[]>`SELECT sealed FROM key_check`;
  if (!opens(box, row.sealed, PROBE)) throw new Error(WRONG_KEY);
}

/** Whether `box` opens `sealed` (to `expected`, when given). */
function opens(box: SecretBox, sealed: string, expected?: string): boolean {
  try {
    const opened = box.open(sealed);
    return expected === undefined || opened === expected;
  } catch {
    return false; // another key
  }
}
