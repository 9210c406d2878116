/**
 * Pages through the platform requests (WhatsApp deliveries, Slack events and actions) that were
 * stored raw and acknowledged but never applied — a crash came between — for recovery. Pages
 * are read by key (received time, id) below a bound fixed when the recovery began, so that one
 * recovery visits each request once, and requests acknowledged after it began are left to the
 * live path.
 */
import type { Tx } from "./client.ts";

/** How often recovery tries to apply a stored request before it leaves it for an operator. */
export const MAX_APPLY_ATTEMPTS = 5;

/** Where a page of stored requests ends: the next page starts after it. */
export interface StoredRequestKey {
  receivedAt: string;
  id: number;
}

/** Which stored requests a page holds. */
export interface StoredRequestPage {
  /** Only those received before this time (the database's clock, as `recoveryBound` gave it). */
  before: string;
  /** Only those after this key. */
  after?: StoredRequestKey;
  limit: number;
}

/** The bound of a recovery: the database's time `olderThanSeconds` ago. */
export async function recoveryBound(sql: Tx, olderThanSeconds: number): Promise<string> {
  const [row] = await sql<{ bound: string }[]>`
    SELECT (clock_timestamp() - make_interval(secs => ${olderThanSeconds}))::text AS bound`;
  return row.bound;
}

/** A page of WhatsApp deliveries left unprocessed, oldest first. */
export async function findUnprocessedWhatsAppDeliveries(
  sql: Tx,
  page: StoredRequestPage,
): Promise<(StoredRequestKey & { appId: number; body: Uint8Array })[]> {
  return await sql<(StoredRequestKey & { appId: number; body: Uint8Array })[]>`
    SELECT app_id AS "appId", id, body, received_at::text AS "receivedAt"
    FROM whatsapp_deliveries WHERE ${unprocessed(sql, page)}`;
}

/** A page of Slack requests left unprocessed, oldest first. */
export async function findUnprocessedSlackDeliveries(
  sql: Tx,
  page: StoredRequestPage,
): Promise<(StoredRequestKey & { kind: "event" | "action"; body: Uint8Array })[]> {
  return await sql<(StoredRequestKey & { kind: "event" | "action"; body: Uint8Array })[]>`
    SELECT id, kind, body, received_at::text AS "receivedAt"
    FROM slack_deliveries WHERE ${unprocessed(sql, page)}`;
}

/** The condition, order and limit of a page (both tables share these columns and index). */
function unprocessed(sql: Tx, page: StoredRequestPage) {
  const after = page.after
    ? sql`AND (received_at, id) > (${page.after.receivedAt}::timestamptz, ${page.after.id})`
    : sql``;
  return sql`processed_at IS NULL AND attempts < ${MAX_APPLY_ATTEMPTS}
    AND received_at < ${page.before}::timestamptz ${after}
    ORDER BY received_at, id LIMIT ${page.limit}`;
}
