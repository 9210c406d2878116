/**
 * The postgres.js client as Parley configures it. Every connection runs in UTC, and
 * `timestamptz` values arrive as ISO 8601 strings with exactly six fractional digits, so the
 * database's real microseconds reach clients (a JavaScript Date would keep only milliseconds);
 * `bigint` values arrive as numbers.
 */
import postgres from "postgres";
import { formatTimestamp } from "./timestamp.ts";
import { settledWithin } from "../settled_within.ts";

/** A postgres.js connection pool. */
export type Sql = postgres.Sql;
/** A postgres.js handle inside a transaction, or the pool itself. */
export type Tx = postgres.TransactionSql | postgres.Sql;

/** A statement built and not yet awaited. */
export type PendingQuery<T extends readonly postgres.MaybeRow[]> = postgres.PendingQuery<T>;

/** A row as a statement returns it. */
export type Row = postgres.Row;

/** Options of {@linkcode connect}. */
export interface ConnectOptions {
  /** Pool size. @default 10 */
  max?: number;
  /** Name shown in `pg_stat_activity`. @default "parley" */
  applicationName?: string;
  /** Session settings sent at connection start (e.g. `{ enable_seqscan: "off" }`). @default {} */
  settings?: Record<string, string>;
}

const TIMESTAMPTZ_OID = 1184;
const INT8_OID = 20;

/**
 * Seconds before a connection tries again after `retries` failed connects in a row: postgres.js's
 * own schedule (3^n / 100 s, from half to all of it) capped at 2 s instead of 20. A 6 s restart of
 * PostgreSQL left the next try up to 7 s after it was back (audited: nothing stored for 6.4 s
 * after); a try every 1–2 s against a server that is down costs nothing.
 */
export function reconnectDelaySeconds(retries: number, random: () => number = Math.random): number {
  return (0.5 + random() / 2) * Math.min(3 ** retries / 100, 2);
}

/** Opens a pool to `url`. Nothing connects until the first query. */
export function connect(url: string, options: ConnectOptions = {}): Sql {
  const { url: address, socketPath } = splitSocketHost(url);
  return postgres(address, {
    ...(socketPath ? { path: socketPath } : {}),
    max: options.max ?? 10,
    backoff: (retries: number) => reconnectDelaySeconds(retries),
    onnotice: () => {},
    connection: {
      application_name: options.applicationName ?? "parley",
      TimeZone: "UTC",
      ...options.settings,
    },
    types: {
      // Ids and counts are bigint; they stay far below 2^53, so plain numbers are exact.
      int8: {
        to: INT8_OID,
        from: [INT8_OID],
        serialize: (value: number | bigint) => String(value),
        parse: Number,
      },
      timestamptz: {
        to: TIMESTAMPTZ_OID,
        from: [TIMESTAMPTZ_OID],
        serialize: (value: string | Date) => value instanceof Date ? value.toISOString() : value,
        parse: formatTimestamp,
      },
    },
  });
}

/**
 * Reads libpq's `?host=/directory` form (a Unix-domain socket), which postgres.js does not:
 * returns the URL without it and the socket's path. Unix sockets cost the kernel far less
 * than TCP on loopback, and every write of the hot path crosses one.
 */
export function splitSocketHost(url: string): { url: string; socketPath: string | null } {
  const parsed = new URL(url);
  const host = parsed.searchParams.get("host");
  if (!host || !host.startsWith("/")) return { url, socketPath: null };
  parsed.searchParams.delete("host");
  const port = parsed.port || "5432";
  return { url: parsed.toString(), socketPath: `${host.replace(/\/$/, "")}/.s.PGSQL.${port}` };
}

/** Most connections of one worker thread's pool ({@linkcode connectWorkerPool}). */
export const WORKER_POOL_SIZE = 4;

/**
 * The pool of a worker thread that runs batch statements (the actors' writes, the deliverer's
 * claims and records). Those statements join their inputs to big tables by key as index probes,
 * written so that one generic plan serves every batch size, and postgres.js keeps each prepared
 * statement per connection. Two settings keep it that way: without `enable_seqscan`, a plan made
 * while a table was nearly empty, or one guessing 100 input rows, would scan the table whole long
 * after it grew; and without `force_generic_plan`, PostgreSQL plans the big write statements
 * afresh for every small batch (a custom plan looks cheaper for one row than the generic one),
 * which made a one-message transaction cost its backend 2.5 ms of CPU instead of 1.1 ms.
 */
export function connectWorkerPool(url: string, applicationName: string): Sql {
  return connect(url, {
    max: WORKER_POOL_SIZE,
    applicationName,
    settings: {
      enable_seqscan: "off",
      plan_cache_mode: "force_generic_plan",
      // A batch's statements are pipelined and never wait on anything else; a session idle in a
      // transaction this long belongs to a worker that died mid-batch, and holds its
      // applications' locks until PostgreSQL ends it.
      idle_in_transaction_session_timeout: "10s",
    },
  });
}

/**
 * Runs one query on a fresh pool before anything else does, so that postgres.js has fetched the
 * array types before any statement with an array parameter binds. Without the types it sends an
 * array as `''`: seen once at a delivery worker's start (`malformed array literal: ""`), not
 * reproduced in isolation; a new connection's transaction binding while the pool's first type
 * fetch runs is the likely way (porsager/postgres#952). A failure is left to the pool's first
 * real query to report.
 */
export async function warmUp(sql: Sql): Promise<void> {
  await sql`SELECT 1`.catch(() => {});
}

/** How long a transaction waits for a connection of its pool before it fails. */
export const RESERVE_TIMEOUT_MS = 10_000;

/**
 * A connection of `sql` reserved for a transaction, or an error after `timeoutMs`. postgres.js
 * 3.4 can leave a queued `reserve()` unsettled forever when the server ends the connection it
 * waits for (porsager/postgres#1195: after the embedded PostgreSQL was killed and started again,
 * the commit loop waited on two such reserves and the instance never wrote again). A connection
 * that arrives after the deadline is released at once.
 */
export async function reserveWithin(
  sql: Pick<Sql, "reserve">,
  timeoutMs: number = RESERVE_TIMEOUT_MS,
): Promise<postgres.ReservedSql> {
  const reserving = sql.reserve();
  try {
    return await settledWithin(
      reserving,
      timeoutMs,
      // The code postgres.js gives a connection that could not be made in time: the database
      // was not reached, so a retry may succeed (see transient_retry.ts).
      () =>
        Object.assign(new Error(`No database connection came within ${timeoutMs} ms`), {
          code: "CONNECT_TIMEOUT",
        }),
    );
  } catch (error) {
    reserving.then((conn) => conn.release(), () => {});
    throw error;
  }
}

/**
 * Resolves once the database answers a trivial query; rejects with its error, or with `late`
 * once `timeoutMs` passed first.
 */
export async function pingDatabase(
  sql: Sql,
  timeoutMs: number,
  late = "Database did not answer in time",
): Promise<void> {
  await settledWithin(sql`SELECT 1`, timeoutMs, () => new Error(late));
}

/** How long a start or an admin command waits for the database's first answer. */
export const FIRST_CONTACT_MS = 30_000;

/**
 * Resolves once the database at `sql` first answers; rejects with its error, or after
 * `timeoutMs` without an answer. Something that takes the connection but speaks no PostgreSQL
 * (an HTTP port, a proxy to nowhere) closes it before it is ready, and postgres.js then connects
 * again at once, forever, never failing the query: without this deadline a start hung silently.
 * The pool is to be ended without waiting (`sql.end({ timeout: 0 })`) after a rejection.
 */
export function awaitFirstContact(
  sql: Sql,
  timeoutMs: number = FIRST_CONTACT_MS,
): Promise<void> {
  return pingDatabase(
    sql,
    timeoutMs,
    `Cannot reach the database: nothing answered as PostgreSQL within ${timeoutMs / 1000} s`,
  );
}
