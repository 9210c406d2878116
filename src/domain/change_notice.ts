/**
 * The small payload that a write transaction NOTIFYs on commit, so that every instance's
 * realtime hub learns what changed without polling. It carries ids only (PostgreSQL caps a
 * payload below 8000 bytes); the hub loads what it needs. A notice too large for one payload
 * is split into several.
 */

/** Channel of the change notices. */
export const CHANGES_CHANNEL = "parley_changes";

/** Largest payload sent, in bytes (PostgreSQL refuses 8000 and more). */
const MAX_PAYLOAD_BYTES = 7_900;

/** What one committed transaction changed. */
export interface ChangeNotice {
  /** Applications with changes. */
  a: number[];
  /** Smallest and largest id of the messages created (they may interleave with others'). */
  m?: [number, number];
  /** Conversations whose state changed, as `[appId, chatId]`. */
  c?: [number, number][];
  /** Present when the transaction queued outbox work (webhook events, channel sends). */
  w?: 1;
  /** Messages edited or deleted, as `[appId, chatId, messageId, 1 = deleted | 0 = edited]`. */
  e?: [number, number, number, 0 | 1][];
}

/** Encodes a notice as one or more NOTIFY payloads, each under the size limit. */
export function encodeChangeNotice(notice: ChangeNotice): string[] {
  const whole = JSON.stringify(notice);
  if (whole.length <= MAX_PAYLOAD_BYTES) return [whole];
  const payloads: string[] = [];
  const queued = notice.w ? { w: notice.w } : {};
  for (let i = 0; i < (notice.e ?? []).length; i += 150) {
    const edits = notice.e!.slice(i, i + 150);
    payloads.push(JSON.stringify({ a: [...new Set(edits.map(([app]) => app))], e: edits }));
  }
  if (notice.m) payloads.push(JSON.stringify({ a: notice.a, m: notice.m, ...queued }));
  let chats: [number, number][] = [];
  const flush = () => {
    if (chats.length === 0) return;
    payloads.push(
      JSON.stringify({ a: [...new Set(chats.map(([app]) => app))], c: chats, ...queued }),
    );
    chats = [];
  };
  for (const chat of notice.c ?? []) {
    chats.push(chat);
    if (chats.length >= 200) flush();
  }
  flush();
  // The application list of the message range alone can exceed the limit: split it too.
  return payloads.flatMap((payload) =>
    payload.length <= MAX_PAYLOAD_BYTES ? [payload] : splitApps(JSON.parse(payload))
  );
}

function splitApps(notice: ChangeNotice): string[] {
  const parts: string[] = [];
  for (let i = 0; i < notice.a.length; i += 500) {
    parts.push(JSON.stringify({ ...notice, a: notice.a.slice(i, i + 500) }));
  }
  return parts;
}

/** Parses a payload; null when it is not a change notice. */
export function decodeChangeNotice(payload: string): ChangeNotice | null {
  try {
    const value = JSON.parse(payload);
    if (!value || !Array.isArray(value.a) || !value.a.every(Number.isInteger)) return null;
    if (!isRange(value.m) || !isEdits(value.e)) return null;
    return value as ChangeNotice;
  } catch {
    return null;
  }
}

function isRange(range: unknown): boolean {
  return range === undefined ||
    (Array.isArray(range) && range.length === 2 && range.every(Number.isSafeInteger));
}

function isEdits(edits: unknown): boolean {
  return edits === undefined ||
    (Array.isArray(edits) &&
      edits.every((edit) =>
        Array.isArray(edit) && edit.length === 4 && edit.every(Number.isSafeInteger)
      ));
}

/**
 * `notices` with each run of consecutive ones that only created messages joined into one: their
 * applications together, their id ranges spanned (a range may hold other transactions' ids
 * anyway; a message is pushed once).
 */
export function joinMessageRuns(notices: ChangeNotice[]): ChangeNotice[] {
  const joined: ChangeNotice[] = [];
  let run: { a: Set<number>; m: [number, number] } | null = null;
  for (const notice of notices) {
    if (notice.m && !notice.c?.length && !notice.e?.length) {
      if (run) {
        for (const appId of notice.a) run.a.add(appId);
        run.m = [Math.min(run.m[0], notice.m[0]), Math.max(run.m[1], notice.m[1])];
      } else {
        run = { a: new Set(notice.a), m: [notice.m[0], notice.m[1]] };
      }
      continue;
    }
    if (run) joined.push({ a: [...run.a], m: run.m });
    run = null;
    joined.push(notice);
  }
  if (run) joined.push({ a: [...run.a], m: run.m });
  return joined;
}
