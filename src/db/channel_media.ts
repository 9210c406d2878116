/** Queries of `channel_media`: which application a channel's media id was received for. */
import type { Tx } from "./client.ts";

/** Whether media `mediaId` of `channel` was received for application `appId`. */
export async function isMediaOf(
  sql: Tx,
  channel: "whatsapp" | "slack",
  appId: number,
  mediaId: string,
): Promise<boolean> {
  const rows = await sql`
    SELECT 1 FROM channel_media
    WHERE channel = ${channel} AND media_id = ${mediaId} AND app_id = ${appId}`;
  return rows.length > 0;
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
