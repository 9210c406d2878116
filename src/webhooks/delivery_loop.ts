/**
 * The delivery poller: it claims due deliveries and attempts them, woken by change notices (a
 * commit may have queued an event), when a retry it scheduled comes due, and by a slow poll as
 * the fallback (retries that another instance scheduled). It has explicit states, never dies
 * because one attempt threw, and `stop()` waits for the attempts in flight. With `keyOf`, it
 * shares its slots between keys (applications) as `domain/fair_share.ts` says, and tells each
 * claim how many each key may be given.
 */
import { type SlotRoom, slotRoom } from "../domain/fair_share.ts";

/** Options of {@linkcode createDeliveryLoop}. */
export interface DeliveryLoopOptions<T, O = unknown> {
  /**
   * Claims up to `limit` due deliveries, of each key at most its `room` (every key may be given
   * `limit` without `keyOf`). `more`: the claim stopped before it saw everything that may be due
   * (a round of applications at its bound), so the loop claims again at once.
   */
  claim(limit: number, room: SlotRoom<number>): Promise<T[] | { rows: T[]; more: boolean }>;
  /** The key whose share of the slots a delivery counts against (its application). */
  keyOf?(delivery: T): number;
  /** Makes one attempt (and records it). */
  attempt(delivery: T): Promise<O>;
  /**
   * In how many milliseconds the delivery of an attempt's outcome is due again (a retry it
   * recorded), or null: the loop claims again then, rather than at its next poll.
   */
  dueAgainInMs?(outcome: O): number | null;
  /**
   * Deliveries wait for their predecessors (a conversation's sends go one at a time, in order):
   * a claim leaves a delivery whose predecessor is in flight, so each attempt's end makes the
   * loop claim again rather than leave its successor to the next poll. @default false
   */
  ordered?: boolean;
  /** Reports what went wrong (a claim or an attempt that threw). */
  onError(error: unknown): void;
  /** Most attempts in flight at once (and so most deliveries claimed at once). @default 64 */
  batchSize?: number;
  /** Longest sleep between claims without a wake-up, in milliseconds. @default 1_000 */
  pollMs?: number;
}

/** The loop returned by {@linkcode createDeliveryLoop}. */
export interface DeliveryLoop {
  /** Claims again now (something may have been queued). */
  wake(): void;
  /** Stops claiming and resolves when the attempts in flight are done. */
  stop(): Promise<void>;
}

/** A retry comes due at the time recorded; the wake-up waits this much more for clocks and commits. */
const DUE_MARGIN_MS = 10;

/** Starts the loop at once. */
export function createDeliveryLoop<T, O = unknown>(
  options: DeliveryLoopOptions<T, O>,
): DeliveryLoop {
  const {
    claim,
    attempt,
    onError,
    dueAgainInMs,
    keyOf,
    ordered = false,
    batchSize = 64,
    pollMs = 1_000,
  } = options;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new RangeError(`Cannot create delivery loop: batchSize must be >= 1, got ${batchSize}`);
  }
  let state: "running" | "stopping" = "running";
  let woken = false;
  let wakeUp: (() => void) | null = null;

  function sleep(): Promise<void> {
    if (woken) {
      woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, pollMs);
      function done() {
        clearTimeout(timer);
        wakeUp = null;
        woken = false;
        resolve();
      }
      wakeUp = done;
    });
  }

  /** Attempts in flight; the loop claims only for free slots and never waits for a whole batch. */
  const inFlight = new Set<Promise<void>>();
  let slotFreed: (() => void) | null = null;
  /** Attempts in flight per key (with `keyOf`). */
  const inFlightByKey = new Map<number, number>();
  /** Attempts finished so far. */
  let finished = 0;
  /**
   * The last claim came back short where a key's room bound it: what it left may be due, so the
   * next attempt to finish makes the loop claim again.
   */
  let heldBack = false;

  /** The timer of the earliest retry this loop scheduled, and when it fires. */
  let retryTimer: ReturnType<typeof setTimeout> | null = null;
  let retryWakeAt = Infinity;

  function wakeIn(ms: number): void {
    const at = Date.now() + ms + DUE_MARGIN_MS;
    if (at >= retryWakeAt || state !== "running") return;
    if (retryTimer !== null) clearTimeout(retryTimer);
    retryWakeAt = at;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      retryWakeAt = Infinity;
      wake();
    }, at - Date.now());
  }

  function wake(): void {
    if (wakeUp) wakeUp();
    else woken = true;
  }

  function start(delivery: T): void {
    const key = keyOf?.(delivery);
    if (key !== undefined) inFlightByKey.set(key, (inFlightByKey.get(key) ?? 0) + 1);
    const done: Promise<void> = attempt(delivery).then(
      (outcome) => {
        const due = dueAgainInMs?.(outcome) ?? null;
        if (due !== null) wakeIn(due);
      },
      (error) => onError(error),
    ).finally(() => {
      finished++;
      inFlight.delete(done);
      if (key !== undefined) {
        const left = inFlightByKey.get(key)! - 1;
        if (left === 0) inFlightByKey.delete(key);
        else inFlightByKey.set(key, left);
      }
      if (heldBack || ordered) {
        heldBack = false;
        wake();
      }
      slotFreed?.();
    });
    inFlight.add(done);
  }

  async function run(): Promise<void> {
    while (state === "running") {
      if (inFlight.size >= batchSize) {
        await new Promise<void>((resolve) => slotFreed = resolve);
        slotFreed = null;
        continue;
      }
      const wanted = batchSize - inFlight.size;
      const room = slotRoom(inFlightByKey, batchSize);
      const finishedBefore = finished;
      let claimed: T[] = [];
      let more = false;
      try {
        const result = await claim(wanted, room);
        if (Array.isArray(result)) claimed = result;
        else ({ rows: claimed, more } = result);
      } catch (error) {
        onError(error);
      }
      for (const delivery of claimed) start(delivery);
      // Everything asked came back: more may be due, so claim again once a slot is free. Fewer:
      // nothing else is due until a commit wakes the loop (or the poll does) — unless a key's
      // room bound the claim, and then as soon as an attempt ends (one that ended during the
      // claim already made room).
      if (claimed.length < wanted && !more && state === "running") {
        if (keyOf && roomBound(room, claimed.map(keyOf))) {
          if (finished !== finishedBefore) continue;
          heldBack = true;
        }
        await sleep();
      }
    }
    await Promise.all(inFlight);
  }

  const running = run();
  return {
    wake,
    async stop() {
      state = "stopping";
      if (retryTimer !== null) clearTimeout(retryTimer);
      wakeUp?.();
      await running;
      if (retryTimer !== null) clearTimeout(retryTimer);
    },
  };
}

/** Whether a key's room bound a claim: a key had none, or got all it had. */
function roomBound(room: SlotRoom<number>, claimedKeys: number[]): boolean {
  const given = new Map<number, number>();
  for (const key of claimedKeys) given.set(key, (given.get(key) ?? 0) + 1);
  for (const free of room.roomOfBusy.values()) if (free === 0) return true;
  for (const [key, count] of given) {
    if (count >= (room.roomOfBusy.get(key) ?? room.roomOfIdle)) return true;
  }
  return false;
}
