/**
 * The order in which a channel's stored requests (WhatsApp deliveries, Slack requests) reach the
 * actors, per application or workspace: the order they arrived in. A request is handed over once
 * the one before it was handed over — never waiting for its commit, so that the requests of one
 * apply window commit together — and at most `maxInFlight` wait for their answers at once.
 *
 * A request whose apply failed because the database could not be reached, or its worker died, is
 * tried again in a moment rather than left to recovery a minute later, by when the requests behind
 * it would have been applied first: a customer's message sent during a restart of PostgreSQL would
 * land after the ones sent once it was back. While such a request waits for its retry, the requests
 * of its key behind it wait for it (and for every other request before them) to be final, and
 * failed requests are retried in the order they arrived. Requests already handed over when the
 * failure came are not held back. Retries of a key stop `retryWithinMs` after its first failure
 * (any success resets that clock); a request that still fails is left to recovery, as is one that
 * arrives when `maxHeld` requests already wait behind retries.
 */
import { createApplyWindow } from "./apply_window.ts";
import { createInFlightLimit } from "./in_flight_limit.ts";

/** One try at applying a request: resolves once applied, rejects when that failed. */
export type ApplyAttempt = () => Promise<void>;

/** The failure of an attempt that may succeed when tried again (the database was not reached). */
export class RetryableApplyError extends Error {
  /** Names the failure. */
  constructor(message: string) {
    super(message);
    this.name = "RetryableApplyError";
  }
}

/** Pauses between retries of a failed request, in milliseconds; the last one repeats. */
export const APPLY_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1_000, 2_000, 5_000];

/** How long after a key's first failure its requests are retried. */
export const APPLY_RETRY_WITHIN_MS = 60_000;

/** Options of {@linkcode createOrderedApply}. */
export interface OrderedApplyOptions {
  /** How long requests wait to be handed over together (see apply_window.ts). */
  windowMs: number;
  /** Most requests waiting for their answers at once. @default 256 */
  maxInFlight?: number;
  /** @default APPLY_RETRY_DELAYS_MS */
  retryDelaysMs?: readonly number[];
  /** @default APPLY_RETRY_WITHIN_MS */
  retryWithinMs?: number;
  /**
   * Most requests, of all keys, held back behind a retry at once (their bodies are in memory);
   * beyond it a request fails at once, left to recovery. @default 10_000
   */
  maxHeld?: number;
}

/** Requests applied in order, per key. */
export interface OrderedApply {
  /**
   * Applies a request of `key` in its turn: `prepared` yields its attempt (a rejection counts as
   * its failure, and it is not retried). Resolves once applied; rejects with the last failure.
   */
  apply(key: string, prepared: Promise<ApplyAttempt>): Promise<void>;
  /** Stops retrying: requests waiting for a retry reject at once with their last failure. */
  stop(): void;
}

interface KeyState {
  /** Settles once the last request has been handed over (or could not be). */
  handedOver: Promise<void>;
  /** Settles once every request so far is final. */
  finished: Promise<void>;
  /** Settles once every retry so far is final. */
  retries: Promise<void>;
  /** Requests waiting for a retry. */
  retrying: number;
  /** When the retries stop; set by the first failure since the last success. */
  giveUpAt: number | null;
  /** Requests not final yet: the state is dropped at 0. */
  pending: number;
}

/** Creates the order keeper. */
export function createOrderedApply(options: OrderedApplyOptions): OrderedApply {
  const {
    retryDelaysMs = APPLY_RETRY_DELAYS_MS,
    retryWithinMs = APPLY_RETRY_WITHIN_MS,
    maxHeld = 10_000,
  } = options;
  let held = 0;
  if (retryDelaysMs.length === 0) throw new RangeError("Cannot retry without delays");
  const applyWindow = createApplyWindow(options.windowMs);
  const inFlight = createInFlightLimit(options.maxInFlight ?? 256);
  const keys = new Map<string, KeyState>();
  const stopped = new AbortController();

  /** Runs `attempt` in a free slot; resolves to its answer once it was started. */
  async function start(attempt: ApplyAttempt): Promise<{ answer: Promise<void> }> {
    await inFlight.acquire();
    let answer: Promise<void>;
    try {
      answer = attempt();
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.finally(() => inFlight.release()).catch(() => {});
    return { answer };
  }

  async function attemptAnswered(state: KeyState, attempt: ApplyAttempt): Promise<void> {
    await (await start(attempt)).answer;
    state.giveUpAt = null;
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      stopped.signal.addEventListener("abort", done, { once: true });
      function done() {
        clearTimeout(timer);
        stopped.signal.removeEventListener("abort", done);
        resolve();
      }
    });
  }

  /** Retries a failed request after those that failed before it, until it is applied or given up. */
  async function retry(state: KeyState, attempt: ApplyAttempt, failure: unknown): Promise<void> {
    state.retrying++;
    state.giveUpAt ??= Date.now() + retryWithinMs; // the requests failing behind it share it
    const turn = state.retries;
    const retried = (async () => {
      await turn;
      let last = failure;
      for (let i = 0;; i++) {
        const delay = retryDelaysMs[Math.min(i, retryDelaysMs.length - 1)];
        // A success since (of a request behind this one) restarted the clock.
        state.giveUpAt ??= Date.now() + retryWithinMs;
        if (stopped.signal.aborted || Date.now() + delay > state.giveUpAt) throw last;
        await sleep(delay);
        if (stopped.signal.aborted) throw last;
        try {
          return await attemptAnswered(state, attempt);
        } catch (error) {
          if (!(error instanceof RetryableApplyError)) throw error;
          last = error;
        }
      }
    })();
    state.retries = retried.then(() => {}, () => {});
    try {
      await retried;
    } finally {
      state.retrying--;
    }
  }

  function apply(key: string, prepared: Promise<ApplyAttempt>): Promise<void> {
    prepared.catch(() => {}); // awaited in turn below
    let state = keys.get(key);
    if (!state) {
      const settled = Promise.resolve();
      state = {
        handedOver: settled,
        finished: settled,
        retries: settled,
        retrying: 0,
        giveUpAt: null,
        pending: 0,
      };
      keys.set(key, state);
    }
    const own = state;
    // Behind a retry, a request may wait a minute with its body in memory: only so many may.
    const holding = own.retrying > 0;
    if (holding && held >= maxHeld) {
      return Promise.reject(new Error("Too many requests held back behind retries"));
    }
    if (holding) held++;
    own.pending++;
    const { handedOver: before, finished: allBefore } = own;
    const gathered = applyWindow.next();
    const handed = Promise.all([before, gathered]).then(async () => {
      if (own.retrying > 0) await allBefore;
      const attempt = await prepared;
      return { attempt, ...(await start(attempt)) };
    });
    own.handedOver = handed.then(() => {}, () => {});
    if (holding) own.handedOver.then(() => held--);
    const outcome = handed.then(async ({ attempt, answer }) => {
      try {
        await answer;
        own.giveUpAt = null;
      } catch (error) {
        if (!(error instanceof RetryableApplyError) || stopped.signal.aborted) throw error;
        await retry(own, attempt, error);
      }
    });
    const final = outcome.then(() => {}, () => {});
    own.finished = Promise.all([allBefore, final]).then(() => {});
    final.then(() => {
      if (--own.pending === 0 && keys.get(key) === own) keys.delete(key);
    });
    return outcome;
  }

  return { apply, stop: () => stopped.abort() };
}
