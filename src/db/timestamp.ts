/**
 * Converts PostgreSQL's text form of a `timestamptz` in UTC (`2026-11-22 01:27:40.1234+00`)
 * into the contract's form (`2026-11-22T01:27:40.123400Z`): always six fractional digits.
 */

/** Formats PostgreSQL's UTC `timestamptz` text as ISO 8601 with microseconds and `Z`. */
export function formatTimestamp(text: string): string {
  const match = /^(\d{4,}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00(?::00)?$/.exec(text);
  if (!match) throw new RangeError(`Cannot format timestamp: expected UTC text, got "${text}"`);
  const [, date, time, fraction = ""] = match;
  return `${date}T${time}.${fraction.padEnd(6, "0")}Z`;
}
