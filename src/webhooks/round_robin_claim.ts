/**
 * The outbox senders' claim (webhook deliveries, WhatsApp sends, the Slack mirror): each claim's
 * round of applications starts with the one after the application served last, so that every
 * application with work waiting is served in turn, whatever the others queued.
 */
import type { ClaimRound } from "../db/application_round.ts";
import type { SlotRoom } from "../domain/fair_share.ts";

/** What a round-robin claim hands out: a row of an application, with its place in the round. */
export interface TurnTaken {
  appId: number;
  /** Its application's place in the claim's round (1 first). */
  turn: number;
}

/** A claim given the application to start after. */
export type ClaimAfter<T> = (
  limit: number,
  room: SlotRoom<number>,
  after: number,
) => Promise<ClaimRound<T>>;

/**
 * Claims up to `limit` due rows, of each application at most its room; `more` when its round
 * stopped at its bound of applications visited, so that the caller claims again at once.
 */
export type RoundRobinClaim<T> = (
  limit: number,
  room: SlotRoom<number>,
) => Promise<{ rows: T[]; more: boolean }>;

/**
 * A claim that remembers, between calls, which application it served last. A round stopped at its
 * bound of applications asks for `more` until the rounds have come around to where the first of
 * them started, so that every application is visited once before the caller sleeps.
 */
export function roundRobin<T extends TurnTaken>(claim: ClaimAfter<T>): RoundRobinClaim<T> {
  let lastServed = 0;
  /** Where the rounds stopped at their bound started, while they go on. */
  let cycleStart: number | null = null;
  return async (limit, room) => {
    const after = lastServed;
    const { rows, walkedTo } = await claim(limit, room, after);
    lastServed = walkedTo ?? lastInTurn(rows)?.appId ?? lastServed;
    if (walkedTo === null) {
      cycleStart = null;
      return { rows, more: false };
    }
    cycleStart ??= after;
    if (passes(after, walkedTo, cycleStart)) {
      cycleStart = null;
      return { rows, more: false };
    }
    return { rows, more: true };
  };
}

/** Whether a round from after `from` up to `to`, wrapping past the highest id, passed `point`. */
function passes(from: number, to: number, point: number): boolean {
  return from < to ? from < point && point <= to : point > from || point <= to;
}

/** The claimed row of the application served last in the claim's round, if any. */
function lastInTurn<T extends TurnTaken>(claimed: readonly T[]): T | undefined {
  let last: T | undefined;
  for (const row of claimed) if (last === undefined || row.turn > last.turn) last = row;
  return last;
}
