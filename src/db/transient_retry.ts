/**
 * Writes that record what was already done outside the database (a message WhatsApp accepted, a
 * post Slack made, a webhook attempt) must not be dropped because PostgreSQL was unreachable for a
 * moment: the claim would stay until its lease ran out (2 minutes for channel sends, holding the
 * conversation's later messages) and then the send would go out a second time. So they are tried
 * again while the error says the database could not be reached, never when it refused the
 * statement (a retry of a refused statement would fail the same way, or apply twice).
 */
import postgres from "postgres";

/** SQLSTATE classes and codes that mean "not reached", not "refused". */
const TRANSIENT_SQLSTATE = /^(08|57P0[123]|53300)/;

/**
 * postgres.js's codes for a connection that went away or could not be made, and the socket's.
 * Not its other codes: `CONNECTION_ENDED` (the pool was ended on purpose), `UNDEFINED_VALUE` or
 * `MAX_PARAMETERS_EXCEEDED` (a bug) would fail the same way every time.
 */
const TRANSIENT_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOENT", // the Unix socket of a server still starting
]);

/** Pauses between tries, in milliseconds; the last one repeats. */
const RETRY_DELAYS_MS = [200, 500, 1_000, 2_000, 5_000] as const;

/**
 * Whether `error` says the database could not be reached or was going away (a connection that
 * ended or was refused, a server shutting down or starting), so that trying again may succeed.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error instanceof postgres.PostgresError) return TRANSIENT_SQLSTATE.test(error.code);
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && TRANSIENT_CODES.has(code);
}

/**
 * Runs `write`, and again after 0.2, 0.5, 1, 2, then every 5 s while it fails with a
 * {@linkcode isTransientDatabaseError transient} error, for at most `withinMs`; then (or on any
 * other error) rejects with the last error.
 */
export async function retryingTransient<T>(
  write: () => Promise<T>,
  withinMs: number,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<T> {
  const started = Date.now();
  let paused = 0;
  for (let attempt = 0;; attempt++) {
    try {
      return await write();
    } catch (error) {
      const delay = RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)];
      const elapsed = Math.max(Date.now() - started, paused);
      if (!isTransientDatabaseError(error) || elapsed + delay > withinMs) throw error;
      await sleep(delay);
      paused += delay;
    }
  }
}
