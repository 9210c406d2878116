/**
 * The outbox senders' claim (webhook deliveries, WhatsApp sends, the Slack mirror): each claim's
 * round of applications starts with the one after the application served last, so that every
 * application with work waiting is served in turn, whatever the others queued.
 */
import type { SlotRoom } from "../domain/fair_share.ts";

/** What a round-robin claim hands out: a row of an application, with its place in the round. */
export interface TurnTaken {
  appId: number;
  /** Its application's place in the claim's round (1 first); null outside the round. */
  turn: number | null;
}

/** A claim given the application to start after. */
export type ClaimAfter<T> = (limit: number, room: SlotRoom<number>, after: number) => Promise<T[]>;

/** Claims up to `limit` due rows, of each application at most its room. */
export type RoundRobinClaim<T> = (limit: number, room: SlotRoom<number>) => Promise<T[]>;

/** A claim that remembers, between calls, which application it served last. */
export function roundRobin<T extends TurnTaken>(claim: ClaimAfter<T>): RoundRobinClaim<T> {
  let lastServed = 0;
  return async (limit, room) => {
    const claimed = await claim(limit, room, lastServed);
    lastServed = lastInTurn(claimed)?.appId ?? lastServed;
    return claimed;
  };
}

/** The claimed row of the application served last in the claim's round, if any. */
function lastInTurn<T extends TurnTaken>(claimed: readonly T[]): T | undefined {
  let last: T | undefined;
  for (const row of claimed) {
    if (row.turn !== null && (last === undefined || row.turn > last.turn!)) last = row;
  }
  return last;
}
