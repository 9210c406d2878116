/** Queries of `channel_media`: which application a channel's media id was received for. */
import type { Tx } from "./client.ts";

/** The application media `mediaId` of `channel` belongs to, or null. */
export async function findMediaApp(
  sql: Tx,
  channel: "whatsapp" | "slack",
  mediaId: string,
): Promise<number | null> {
  const [row] = await sql<{ app_id: number }[]>`
    SELECT app_id FROM channel_media WHERE channel = ${channel} AND media_id = ${mediaId}`;
  return row?.app_id ?? null;
}

/** Records media ids received for `appId` (the first application to receive an id keeps it). */
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
