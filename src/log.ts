/**
 * Structured logging: one JSON object per line on stdout (errors on stderr), so that logs can
 * be shipped and queried as they are. Callers pass fields, never secrets.
 */

/** Log levels, least severe first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const ORDER: Record<LogLevel | "silent", number> = {
  debug: 10,
  info: 20,
  warn: 30,
  error: 40,
  silent: 100,
};

let threshold = ORDER.info;

/** Sets the least severe level that is written. */
export function setLogLevel(level: LogLevel | "silent"): void {
  threshold = ORDER[level];
}

/** Whether a line of `level` would be written (to skip building fields nobody reads). */
export function isLogged(level: LogLevel): boolean {
  return ORDER[level] >= threshold;
}

const encoder = new TextEncoder();

/**
 * Writes `line` and a newline to `stream` whole, synchronously, so that no line is lost or torn by
 * a crash right after. Straight to the file descriptor: `console.log` cost ~10 µs more per line
 * (with one access line per request, a tenth of a request's CPU). A log that cannot be written
 * (a closed pipe) must not take a request down with it.
 */
function writeLine(stream: typeof Deno.stdout, line: string): void {
  const bytes = encoder.encode(line + "\n");
  try {
    for (let written = 0; written < bytes.length;) {
      written += stream.writeSync(bytes.subarray(written));
    }
  } catch {
    // Nowhere to write it.
  }
}

/** Writes one log line when `level` is at or above the threshold. */
export function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
  if (ORDER[level] < threshold) return;
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields });
  // Errors are rare, and go through console.error, where tests capture the ones they expect.
  if (level === "error") console.error(line);
  else writeLine(Deno.stdout, line);
}

/**
 * Writes a line that belongs to Parley's interface rather than its diagnostics (the `listening`
 * line that scripts wait for): at level `info`, whatever the threshold, unless logging is silent.
 */
export function announce(msg: string, fields: Record<string, unknown> = {}): void {
  if (threshold === ORDER.silent) return;
  writeLine(
    Deno.stdout,
    JSON.stringify({ time: new Date().toISOString(), level: "info", msg, ...fields }),
  );
}

/** The loggable form of an error: its name, message and cause chain, never a stack of secrets. */
export function describeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { error: String(error) };
  const described: Record<string, unknown> = { error: `${error.name}: ${error.message}` };
  if (error.stack) described.stack = error.stack.split("\n").slice(1, 6).map((s) => s.trim());
  if (error.cause !== undefined) described.cause = describeError(error.cause);
  return described;
}

/**
 * A line that repeats while a condition lasts (every write failing during a database outage):
 * written at most once per `everyMs`, with how many were left out since the last one written.
 */
export function createThrottledLog(
  level: LogLevel,
  msg: string,
  everyMs: number,
): (fields?: Record<string, unknown>) => void {
  let lastWritten = -Infinity;
  let skipped = 0;
  return (fields = {}) => {
    const now = performance.now();
    if (now - lastWritten < everyMs) {
      skipped++;
      return;
    }
    lastWritten = now;
    log(level, msg, skipped > 0 ? { ...fields, repeats_not_logged: skipped } : fields);
    skipped = 0;
  };
}
