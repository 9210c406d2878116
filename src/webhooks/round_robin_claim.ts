/**
 * The webhook deliverer's claim: each claim's round of first attempts starts with the application
 * after the one served last, so that every application with deliveries waiting is served in
 * turn, whatever the others queued.
 */
import type { Tx } from "../db/client.ts";
import { claimDueDeliveries, type ClaimedDelivery } from "../db/deliveries.ts";
import type { SlotRoom } from "../domain/fair_share.ts";

/** Claims up to `limit` due deliveries, of each application at most its room. */
export type RoundRobinClaim = (
  limit: number,
  room: SlotRoom<number>,
) => Promise<ClaimedDelivery[]>;

/** A claim that remembers, between calls, which application it served last. */
export function createRoundRobinClaim(sql: Tx, leaseSeconds: number): RoundRobinClaim {
  let lastServed = 0;
  return async (limit, room) => {
    const claimed = await claimDueDeliveries(sql, { limit, leaseSeconds, room, after: lastServed });
    lastServed = lastInTurn(claimed)?.appId ?? lastServed;
    return claimed;
  };
}

/** The claimed delivery of the application served last in the claim's round, if any. */
function lastInTurn(claimed: readonly ClaimedDelivery[]): ClaimedDelivery | undefined {
  let last: ClaimedDelivery | undefined;
  for (const delivery of claimed) {
    if (delivery.turn !== null && (last === undefined || delivery.turn > last.turn!)) {
      last = delivery;
    }
  }
  return last;
}
