/**
 * Reading the ISO 8601 times clients hand back (`since`, cursors): `Date.parse` takes days a
 * month does not have (30 February becomes 2 March), hours past 23 and other fields the database
 * would refuse, so the fields are checked first.
 */

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:Z|([+-])(\d{2}):(\d{2}))$/;

/**
 * The instant of `text` in Unix milliseconds when it is a real time written
 * `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; null otherwise (a day its month does not have, an
 * hour past 23, a leap second, an offset past 23:59, another shape).
 */
export function isoTimeMs(text: string): number | null {
  const match = ISO_TIME.exec(text);
  if (match === null) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  const [, , , , , , , fraction, sign, offsetHours, offsetMinutes] = match;
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  if (day > daysIn(year, month)) return null;
  if (sign !== undefined && (Number(offsetHours) > 23 || Number(offsetMinutes) > 59)) return null;
  const offsetMs = sign === undefined
    ? 0
    : (sign === "-" ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000;
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day);
  local.setUTCHours(hour, minute, second, Number(`${fraction?.slice(1) ?? ""}000`.slice(0, 3)));
  return local.getTime() - offsetMs;
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}
