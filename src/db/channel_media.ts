/**
 * Queries of `channel_media`: which application a channel's media id was received for, and which
 * messages carry it.
 */
import type { Tx } from "./client.ts";

/** The applications media `mediaId` of `channel` was received for (almost always one). */
export async function findMediaApps(
  sql: Tx,
  channel: "whatsapp" | "slack",
  mediaId: string,
): Promise<number[]> {
  const rows = await sql<{ app_id: number }[]>`
    SELECT app_id FROM channel_media
    WHERE channel = ${channel} AND media_id = ${mediaId}
    ORDER BY app_id LIMIT 100`;
  return rows.map((row) => row.app_id);
}

/** Records media ids received for `appId` (an id may be recorded for several applications). */
export async function recordChannelMedia(
  sql: Tx,
  channel: "whatsapp" | "slack",
  appId: number,
  mediaIds: string[],
): Promise<void> {
  if (mediaIds.length === 0) return;
  await sql`
    INSERT INTO channel_media (channel, media_id, app_id)
    SELECT ${channel}, id, ${appId} FROM unnest(${mediaIds}::text[]) AS id
    ON CONFLICT DO NOTHING`;
}

/** Records which messages carry a channel's media (see {@linkcode isMediaWithdrawn}). */
export async function recordMediaMessages(
  sql: Tx,
  channel: "whatsapp" | "slack",
  carried: { appId: number; mediaId: string; messageId: number }[],
): Promise<void> {
  if (carried.length === 0) return;
  await sql`
    INSERT INTO channel_media_messages (channel, app_id, media_id, message_id)
    SELECT ${channel}, * FROM unnest(${carried.map((one) => one.appId)}::bigint[],
      ${carried.map((one) => one.mediaId)}::text[], ${
    carried.map((one) => one.messageId)
  }::bigint[])
    ON CONFLICT DO NOTHING`;
}

/**
 * Whether media `mediaId` of `channel` was taken back from application `appId`'s visitors: every
 * message that carried it was deleted, or made an internal note after the visitor saw it
 * (`hidden_at`). A note from the start was never the visitor's: its link still serves the team.
 * Media no message was recorded for (received before the record existed) is not withdrawn.
 */
export async function isMediaWithdrawn(
  sql: Tx,
  channel: "whatsapp" | "slack",
  appId: number,
  mediaId: string,
): Promise<boolean> {
  const [row] = await sql<{ withdrawn: boolean }[]>`
    SELECT bool_and(m.id IS NULL OR m.deleted_at IS NOT NULL OR m.hidden_at IS NOT NULL)
      AS withdrawn
    FROM channel_media_messages c
    LEFT JOIN messages m ON m.app_id = c.app_id AND m.id = c.message_id
    WHERE c.channel = ${channel} AND c.app_id = ${appId} AND c.media_id = ${mediaId}`;
  return row.withdrawn === true;
}
