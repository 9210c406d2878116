/**
 * Pages through the platform requests (WhatsApp deliveries, Slack events and actions) that were
 * stored raw and acknowledged but never applied — a crash came between — for recovery. Pages
 * are read by key (received time, id) below a bound fixed when the recovery began, so that one
 * recovery visits each request once, and requests acknowledged after it began are left to the
 * live path.
 */
import { Buffer } from "node:buffer";
import type { Tx } from "./client.ts";
import { storableText } from "../domain/json_document.ts";

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

/** How recent an unapplied request must be for the requests stored after it to wait for it. */
export const AWAITED_REQUEST_AGE_SECONDS = 10;

/** A request stored, and the requests stored before it that it waits for. */
export interface StoredRequest {
  id: number;
  /**
   * The requests of its application or workspace, sharing a scope with it, that another instance
   * stored before it and had not applied yet when it was stored: received in the last
   * {@linkcode AWAITED_REQUEST_AGE_SECONDS}, and never failed. They are applied first (see
   * `channels/earlier_deliveries.ts`).
   */
  earlier: number[];
}

/** Where a channel keeps its stored requests, and what orders them. */
export interface RequestTable {
  table: "whatsapp_deliveries" | "slack_deliveries";
  /** The column naming the application or workspace, and its type. */
  key: { column: "app_id"; type: "bigint" } | { column: "team_id"; type: "text" };
  /** Whether its rows have a `kind`. */
  kinds: boolean;
}

/** A request to store. */
export interface RequestRow {
  /** Its application or workspace. */
  key: number | string;
  body: Uint8Array;
  /**
   * What it must stay in order with: requests sharing a scope (a customer, a thread) are applied
   * in the order they were stored; null when that is not known (ordered with every request of
   * its key). See `domain/order_scopes.ts`.
   */
  scopes: string[] | null;
  /** Its kind, where the table has one. */
  kind?: string;
}

/**
 * Stores `rows` in `where.table` in one statement, as the instance `storedBy`, and answers each
 * stored request, in order, with the requests it waits for.
 */
export async function insertRequests(
  sql: Tx,
  where: RequestTable,
  storedBy: number,
  rows: readonly RequestRow[],
): Promise<StoredRequest[]> {
  const key = sql(where.key.column);
  const table = sql(where.table);
  const kinds = where.kinds ? rows.map((row) => row.kind ?? null) : null;
  // jsonb refuses a NUL or a lone surrogate, which failed the statement storing every request
  // that arrived with one; a scope is kept as text can hold it (ordered with a little more at
  // worst).
  const scopes = rows.map((row) => row.scopes && JSON.stringify(row.scopes.map(storableText)));
  // The statement's snapshot is taken before the rows are inserted, so the waiting ones are
  // those committed before it: each of them has a smaller id. Read through the index on
  // (key, stored_by, id) of those waiting, as two ranges, they cost nothing while only this
  // instance stores the key's requests. They come as rows of their own (`waiting` true), once
  // per statement, and are matched with the stored ones by scope here.
  const found = await sql<
    { waiting: boolean; key: number | string; id: number; scopes: string[] | null }[]
  >`
    WITH stored AS (
      INSERT INTO ${table} (${key}, body, scopes, stored_by${kinds ? sql`, kind` : sql``})
      SELECT d.key, decode(d.body, 'base64'),
        CASE WHEN d.scopes IS NOT NULL
          THEN ARRAY(SELECT jsonb_array_elements_text(d.scopes::jsonb)) END,
        ${storedBy}${kinds ? sql`, d.kind` : sql``}
      FROM unnest(${rows.map((row) => row.key)}::${sql.unsafe(where.key.type)}[],
        ${rows.map((row) => Buffer.from(row.body).toString("base64"))}::text[],
        ${scopes}::text[],
        ${kinds ?? rows.map(() => null)}::text[])
        WITH ORDINALITY AS d (key, body, scopes, kind, n)
      ORDER BY d.n
      RETURNING ${key} AS key, id
    )
    SELECT false AS waiting, key, id, NULL::text[] AS scopes FROM stored
    UNION ALL
    SELECT true, ${key}, id, scopes FROM ${table}
    WHERE ${key} = ANY (${[...new Set(rows.map((row) => row.key))]}::${
    sql.unsafe(where.key.type)
  }[])
      AND (stored_by < ${storedBy} OR stored_by > ${storedBy})
      AND processed_at IS NULL AND attempts = 0
      AND received_at > clock_timestamp() - make_interval(secs => ${AWAITED_REQUEST_AGE_SECONDS})`;
  const waiting = found.filter((row) => row.waiting).sort((a, b) => a.id - b.id);
  // Ids are drawn in insertion order.
  const stored = found.filter((row) => !row.waiting).sort((a, b) => a.id - b.id);
  return stored.map(({ key, id }, index) => {
    const scopes = rows[index].scopes;
    const earlier = waiting.filter((row) =>
      row.key === key &&
      (row.scopes === null || scopes === null || row.scopes.some((s) => scopes.includes(s)))
    );
    return { id, earlier: earlier.map((row) => row.id) };
  });
}

/**
 * Which of the requests `ids` of `key` in `where.table` are still waiting to be applied (not
 * applied, and never failed).
 */
export async function findWaitingRequests(
  sql: Tx,
  where: RequestTable,
  key: number | string,
  ids: readonly number[],
): Promise<number[]> {
  const rows = await sql<{ id: number }[]>`
    SELECT id FROM ${sql(where.table)}
    WHERE ${sql(where.key.column)} = ${key} AND id = ANY (${ids}::bigint[])
      AND processed_at IS NULL AND attempts = 0`;
  return rows.map((row) => row.id);
}
