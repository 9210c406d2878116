/**
 * Converts PostgreSQL's text form of a `timestamptz` in UTC (`2026-11-22 01:27:40.1234+00`)
 * into the contract's form (`2026-11-22T01:27:40.123400Z`): always six fractional digits.
 */

/**
 * Formats PostgreSQL's UTC `timestamptz` text as ISO 8601 with microseconds and `Z`. It runs for
 * every timestamp of every row read, so the common shape (all six digits) is sliced, not matched.
 */
export function formatTimestamp(text: string): string {
  if (
    text.length === 29 && text.charCodeAt(10) === 32 && text.charCodeAt(19) === 46 &&
    text.endsWith("+00") && text.charCodeAt(4) === 45
  ) {
    return `${text.slice(0, 10)}T${text.slice(11, 26)}Z`;
  }
  const match = /^(\d{4,}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00(?::00)?$/.exec(text);
  if (!match) throw new RangeError(`Cannot format timestamp: expected UTC text, got "${text}"`);
  const [, date, time, fraction = ""] = match;
  return `${date}T${time}.${fraction.padEnd(6, "0")}Z`;
}
