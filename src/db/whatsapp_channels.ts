/** Queries of `whatsapp_channels`: an application's WhatsApp business number and its sealed secrets. */
import type { Tx } from "./client.ts";

/** A channel as stored: secrets still sealed. */
export interface StoredWhatsAppChannel {
  appId: number;
  phoneNumberId: string;
  accessTokenSealed: string;
  appSecretSealed: string;
  verifyTokenSealed: string;
  /** Why the channel needs attention (Meta refused its token); null when it works. */
  attentionReason: string | null;
}

interface ChannelRow {
  app_id: number;
  phone_number_id: string;
  access_token_sealed: string;
  app_secret_sealed: string;
  verify_token_sealed: string;
  attention_reason: string | null;
}

function toChannel(row: ChannelRow): StoredWhatsAppChannel {
  return {
    appId: row.app_id,
    phoneNumberId: row.phone_number_id,
    accessTokenSealed: row.access_token_sealed,
    appSecretSealed: row.app_secret_sealed,
    verifyTokenSealed: row.verify_token_sealed,
    attentionReason: row.attention_reason,
  };
}

/**
 * Stores an application's channel, replacing the one it had (and clearing any attention mark:
 * new credentials are a fresh start). Null when another application already uses the number.
 */
export async function replaceWhatsAppChannel(
  sql: Tx,
  channel: Omit<StoredWhatsAppChannel, "attentionReason">,
): Promise<StoredWhatsAppChannel | null> {
  const [row] = await sql<ChannelRow[]>`
    INSERT INTO whatsapp_channels
      (app_id, phone_number_id, access_token_sealed, app_secret_sealed, verify_token_sealed)
    SELECT ${channel.appId}, ${channel.phoneNumberId}, ${channel.accessTokenSealed},
      ${channel.appSecretSealed}, ${channel.verifyTokenSealed}
    WHERE NOT EXISTS (
      SELECT 1 FROM whatsapp_channels o
      WHERE o.phone_number_id = ${channel.phoneNumberId} AND o.app_id <> ${channel.appId}
    )
    ON CONFLICT (app_id) DO UPDATE SET phone_number_id = EXCLUDED.phone_number_id,
      access_token_sealed = EXCLUDED.access_token_sealed,
      app_secret_sealed = EXCLUDED.app_secret_sealed,
      verify_token_sealed = EXCLUDED.verify_token_sealed,
      attention_reason = NULL, attention_at = NULL, updated_at = clock_timestamp()
    RETURNING *`;
  return row ? toChannel(row) : null;
}

/** The channel of an application, or null when it has none. */
export async function findWhatsAppChannel(
  sql: Tx,
  appId: number,
): Promise<StoredWhatsAppChannel | null> {
  const [row] = await sql<ChannelRow[]>`SELECT * FROM whatsapp_channels WHERE app_id = ${appId}`;
  return row ? toChannel(row) : null;
}

/** Marks a channel as needing attention (its token was refused), keeping the first reason. */
export async function markWhatsAppChannelAttention(
  sql: Tx,
  appId: number,
  reason: string,
): Promise<void> {
  await sql`
    UPDATE whatsapp_channels SET attention_reason = ${reason}, attention_at = clock_timestamp()
    WHERE app_id = ${appId} AND attention_reason IS NULL`;
}
