/** Queries of `channel_media`: which application a channel's media id was received for. */
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
