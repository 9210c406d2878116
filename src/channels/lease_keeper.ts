/**
 * Keeps the leases of the channel sends in progress: a claim's lease is short, so that the sends
 * a crashed sender held return to the outbox soon, and renewed while its send goes on, so that a
 * slow send (many parts, each with its timeout and retries) never outlasts it and goes out twice.
 * One statement renews every claim held, at a fixed interval.
 */

/** What {@linkcode createLeaseKeeper} returns. */
export interface LeaseKeeper<T> {
  /** Runs `work` with `claim`'s lease renewed until it settles. */
  holding<R>(claim: T, work: () => Promise<R>): Promise<R>;
  /** Stops renewing; resolves once a renewal in progress settled (the pool may then close). */
  stop(): Promise<void>;
}

/** Options of {@linkcode createLeaseKeeper}. */
export interface LeaseKeeperOptions<T> {
  /** Renews the leases of `claims` (one statement). */
  renew(claims: T[]): Promise<void>;
  /** Time between renewals, in milliseconds: well under the lease. */
  everyMs: number;
  /**
   * Time before a failed renewal is tried again, in milliseconds: a send whose record waited out
   * a database outage must find its lease renewed as soon as the database is back, not an
   * interval later. @default 1_000
   */
  retryMs?: number;
  /** Called with what a failed renewal threw. @default ignores it */
  onError?: (error: unknown) => void;
}

/** Creates a keeper; its timer runs only while claims are held. */
export function createLeaseKeeper<T>(options: LeaseKeeperOptions<T>): LeaseKeeper<T> {
  const { renew, everyMs, retryMs = 1_000, onError = () => {} } = options;
  if (!(everyMs > 0)) throw new RangeError("Cannot create lease keeper: everyMs must be positive");
  const held = new Set<T>();
  let timer: ReturnType<typeof setInterval> | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  /** The renewal in progress, if any. */
  let renewing: Promise<void> | undefined;

  function tick(): void {
    clearTimeout(retry);
    retry = undefined;
    if (held.size === 0) {
      clearInterval(timer);
      timer = undefined;
      return;
    }
    const current: Promise<void> = renew([...held]).catch((error) => {
      onError(error);
      if (stopped || retry !== undefined) return;
      retry = setTimeout(tick, retryMs);
      Deno.unrefTimer(retry);
    }).finally(() => {
      if (renewing === current) renewing = undefined;
    });
    renewing = current;
  }

  return {
    async holding(claim, work) {
      held.add(claim);
      if (timer === undefined && !stopped) {
        timer = setInterval(tick, everyMs);
        Deno.unrefTimer(timer);
      }
      try {
        return await work();
      } finally {
        held.delete(claim);
      }
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(retry);
      timer = retry = undefined;
      await renewing;
    },
  };
}
