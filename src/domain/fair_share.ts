/**
 * How a deliverer shares its attempt slots between applications. An eighth of the slots is kept
 * for applications with nothing in flight; the rest is shared equally (rounded up) between the
 * applications with attempts in flight, and one with none may be given the share it would have
 * beside them. Alone, an application may use seven eighths of the slots; a second one starts at
 * once in the eighth kept free, and gets more as the first one's attempts finish, until both hold
 * half of the rest. So an application whose receiver answers only at the timeout, or that queued
 * a backlog, holds at most its share, and the others' deliveries go on beside it.
 */

/** How many more attempts each application may be given now. */
export interface SlotRoom<K> {
  /** Applications with attempts in flight: how many more each may start (0 at its share). */
  roomOfBusy: Map<K, number>;
  /** How many an application with nothing in flight may start. */
  roomOfIdle: number;
}

/** The room of each application, given the attempts in flight per application and the slots. */
export function slotRoom<K>(inFlight: ReadonlyMap<K, number>, slots: number): SlotRoom<K> {
  if (!Number.isInteger(slots) || slots < 1) {
    throw new RangeError(`Cannot share slots: slots must be >= 1, got ${slots}`);
  }
  const shared = slots - Math.floor(slots / 8);
  const share = Math.ceil(shared / Math.max(1, inFlight.size));
  const roomOfBusy = new Map<K, number>();
  for (const [key, count] of inFlight) roomOfBusy.set(key, Math.max(0, share - count));
  return { roomOfBusy, roomOfIdle: Math.ceil(shared / (inFlight.size + 1)) };
}
