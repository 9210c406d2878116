/**
 * A bound on the channel requests handed to the actors and not yet answered. A webhook is
 * acknowledged as soon as it is stored, so a burst can arrive far faster than it is applied;
 * without a bound every stored request would wait in an actor's mailbox until its ask timed out.
 * With one, the rest wait here (they are stored, and recovery covers a crash) and go on as
 * answers come back.
 */

/** A counting limit: `acquire` resolves when a slot is free, `release` frees one. */
export interface InFlightLimit {
  acquire(): Promise<void>;
  release(): void;
}

/** Creates a limit of `slots` (a positive integer). */
export function createInFlightLimit(slots: number): InFlightLimit {
  if (!Number.isInteger(slots) || slots < 1) {
    throw new RangeError(`Cannot create a limit: slots must be a positive integer, got ${slots}`);
  }
  let free = slots;
  const waiting: (() => void)[] = [];
  return {
    acquire() {
      if (free > 0) {
        free--;
        return Promise.resolve();
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    release() {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
