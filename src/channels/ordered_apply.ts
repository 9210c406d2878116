/**
 * The order in which a channel's stored requests (WhatsApp deliveries, Slack requests) reach the
 * actors, per application or workspace: the order they arrived in. A request is handed over once
 * the one before it was handed over — never waiting for its commit, so that the requests of one
 * apply window commit together — and at most `maxInFlight` wait for their answers at once.
 *
 * A request whose apply failed because the database could not be reached (or the driver lost its
 * transaction) is tried again in a moment rather than left to recovery a minute later, by when the requests behind
 * it would have been applied first: a customer's message sent during a restart of PostgreSQL would
 * land after the ones sent once it was back. While such a request waits for its retry, the requests
 * of its key behind it wait for it (and for every other request before them) to be final, and
 * failed requests are retried in the order they arrived — once one succeeds, the others without
 * a pause. Requests already handed over when the failure came are refused by their actor: each
 * attempt carries its key's stream and epoch ({@linkcode StreamPlace}), a failure moves the key to
 * a new epoch, and an actor that saw a command of a stream fail retryably refuses that stream's
 * commands of its epoch or an earlier one (as retryable), so they are retried after it, in order.
 * Retries of a key stop `retryWithinMs` after its first failure
 * (any success resets that clock), and at shutdown; a request that still fails is left to
 * recovery, as is one that arrives when `maxHeld` requests already wait behind retries.
 */
import { createApplyWindow } from "./apply_window.ts";
import { createInFlightLimit } from "./in_flight_limit.ts";
import { isTransientDatabaseError } from "../db/transient_retry.ts";
import type { StreamPlace } from "../actors/protocol.ts";

/**
 * One try at applying a request, whose actor commands carry `place`: resolves once applied,
 * rejects when that failed.
 */
export type ApplyAttempt = (place: StreamPlace) => Promise<void>;

/** The failure of an attempt that may succeed when tried again (the database was not reached). */
export class RetryableApplyError extends Error {
  /** Names the failure. */
  constructor(message: string) {
    super(message);
    this.name = "RetryableApplyError";
  }
}

/**
 * A request left unapplied for recovery to apply later, through no fault of its own (so not an
 * attempt): the order keeper was stopped (at shutdown) while it waited for a retry or behind one,
 * or it arrived when `maxHeld` requests already waited behind retries.
 */
export class ApplyDeferredError extends Error {
  /** Names the failure that was waiting for its retry. */
  constructor(message: string) {
    super(message);
    this.name = "ApplyDeferredError";
  }
}

/** Pauses between retries of a failed request, in milliseconds; the last one repeats. */
export const APPLY_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1_000, 2_000, 5_000];

/** How long after a key's first failure its requests are retried. */
export const APPLY_RETRY_WITHIN_MS = 60_000;

/** Options of {@linkcode createOrderedApply}. */
export interface OrderedApplyOptions {
  /** Names the channel: a key's stream is `{name}:{key}`. */
  name: string;
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
   * beyond it a request is deferred at once, left to recovery. @default 30_000
   */
  maxHeld?: number;
}

/** Requests applied in order, per key. */
export interface OrderedApply {
  /**
   * Applies a request of `key` in its turn: `prepare` (called at once, and again when a retry
   * follows a preparation that failed) yields its attempt. A {@linkcode RetryableApplyError} from
   * either is retried. Resolves once applied; rejects with the last failure.
   */
  apply(key: string, prepare: () => Promise<ApplyAttempt>): Promise<void>;
  /** Stops retrying: requests waiting for a retry reject at once with their last failure. */
  stop(): void;
}

interface KeyState {
  /** Settles once the last request has been handed over (or could not be). */
  handedOver: Promise<void>;
  /** Settles once every request so far is final. */
  finished: Promise<void>;
  /** Requests waiting for a retry. */
  retrying: number;
  /** When the retries stop; set by the first failure since the last success. */
  giveUpAt: number | null;
  /** Requests applied so far: a retry that sees it grow since its failure tries again at once. */
  successes: number;
  /** Requests not final yet: the state is dropped at 0. */
  pending: number;
  /** The epoch of the key's stream: moved on by every retryable failure. */
  epoch: number;
}

/**
 * The last epoch given out in this thread. Epochs only grow, also across a key's state being
 * dropped and made again, so that an actor's fence never refuses a later request.
 */
let lastEpoch = 0;

/** Creates the order keeper. */
export function createOrderedApply(options: OrderedApplyOptions): OrderedApply {
  const {
    retryDelaysMs = APPLY_RETRY_DELAYS_MS,
    retryWithinMs = APPLY_RETRY_WITHIN_MS,
    maxHeld = 30_000,
  } = options;
  if (retryDelaysMs.length === 0) throw new RangeError("Cannot retry without delays");
  const applyWindow = createApplyWindow(options.windowMs);
  const inFlight = createInFlightLimit(options.maxInFlight ?? 256);
  const keys = new Map<string, KeyState>();
  const stopped = new AbortController();
  /** Requests, of all keys, that arrived while their key held a retry and are not handed over. */
  let held = 0;

  /**
   * Runs `attempt` of `key` in the slot acquired for it (released once it settles) at the key's
   * epoch; returns its answer.
   */
  function run(key: string, state: KeyState, attempt: ApplyAttempt): Promise<void> {
    let answer: Promise<void>;
    try {
      answer = attempt({ stream: `${options.name}:${key}`, epoch: state.epoch });
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.finally(() => inFlight.release()).catch(() => {});
    return answer;
  }

  /**
   * Waits, while a request of the key before this one waits for its retry, until every one
   * before it is final (`allBefore`, `beforeFinal` once it is); at shutdown the request is then
   * left to recovery rather than applied ahead of one that was.
   */
  async function holdBack(
    own: KeyState,
    allBefore: Promise<void>,
    beforeFinal: () => boolean,
  ): Promise<void> {
    if (own.retrying === 0 || beforeFinal()) return;
    await allBefore;
    if (stopped.signal.aborted) {
      throw new ApplyDeferredError("Stopped behind a request waiting for its retry");
    }
  }

  function succeeded(state: KeyState): void {
    state.giveUpAt = null;
    state.successes++;
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (stopped.signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      stopped.signal.addEventListener("abort", done, { once: true });
      function done() {
        clearTimeout(timer);
        stopped.signal.removeEventListener("abort", done);
        resolve();
      }
    });
  }

  /**
   * Retries a failed request once every request before it is final (`turn`), until it is applied
   * or given up; `attempt` is null when its preparation failed, and `prepare` makes it again.
   */
  async function retry(
    key: string,
    state: KeyState,
    prepare: () => Promise<ApplyAttempt>,
    attempt: ApplyAttempt | null,
    failure: unknown,
    turn: Promise<void>,
  ): Promise<void> {
    state.retrying++;
    state.giveUpAt ??= Date.now() + retryWithinMs; // the requests failing behind it share it
    let successesSeen = state.successes;
    try {
      await turn;
      let last = failure;
      for (let i = 0;; i++) {
        // A success since this request last failed (the retry of the one before it, say) says
        // the database is back: no pause then, or a burst of failures would be retried one
        // pause after another. A success also restarted the clock.
        const pause = state.successes === successesSeen
          ? retryDelaysMs[Math.min(i, retryDelaysMs.length - 1)]
          : 0;
        state.giveUpAt ??= Date.now() + retryWithinMs;
        if (Date.now() + pause > state.giveUpAt) throw last;
        if (pause > 0) await sleep(pause);
        if (stopped.signal.aborted) throw new ApplyDeferredError(messageOf(last));
        successesSeen = state.successes;
        try {
          attempt ??= await prepare();
          await inFlight.acquire();
          await run(key, state, attempt);
          succeeded(state);
          return;
        } catch (error) {
          if (!(error instanceof RetryableApplyError)) throw error;
          state.epoch = ++lastEpoch;
          last = error;
        }
      }
    } finally {
      state.retrying--;
    }
  }

  function apply(key: string, prepare: () => Promise<ApplyAttempt>): Promise<void> {
    let state = keys.get(key);
    if (!state) {
      const settled = Promise.resolve();
      state = {
        handedOver: settled,
        finished: settled,
        retrying: 0,
        giveUpAt: null,
        successes: 0,
        pending: 0,
        epoch: ++lastEpoch,
      };
      keys.set(key, state);
    }
    const own = state;
    // Behind a retry, a request may wait a minute with its body in memory: only so many may.
    const holding = own.retrying > 0;
    if (holding && held >= maxHeld) {
      return Promise.reject(new ApplyDeferredError("Too many requests held back behind retries"));
    }
    if (holding) held++;
    own.pending++;
    // Prepared as it arrives, so that the work is spread between arrivals rather than done in
    // one burst when the window closes.
    const prepared = prepare();
    prepared.catch(() => {}); // awaited in turn below
    const { handedOver: before, finished: allBefore } = own;
    let final = false;
    allBefore.then(() => final = true);
    const beforeFinal = () => final;
    /** A failure of this request (its preparation's, `attempt` null, or its answer's). */
    const failed = async (error: unknown, attempt: ApplyAttempt | null) => {
      if (!(error instanceof RetryableApplyError)) throw error;
      // Before anything else is handed over: what was, at the old epoch, its actor refuses.
      own.epoch = ++lastEpoch;
      if (stopped.signal.aborted) throw new ApplyDeferredError(error.message);
      await retry(key, own, prepare, attempt, error, allBefore);
    };
    const gathered = applyWindow.next();
    const handed = Promise.all([before, gathered]).then(async () => {
      await holdBack(own, allBefore, beforeFinal);
      const attempt = await prepared;
      // A request before this one may have failed meanwhile (while this one was prepared, or
      // waited for a slot): it goes first. (Every retry pending is one before this request's.)
      for (;;) {
        await holdBack(own, allBefore, beforeFinal);
        await inFlight.acquire();
        if (own.retrying === 0 || final) break;
        inFlight.release();
      }
      return { attempt, answer: run(key, own, attempt) };
    });
    // Reacting to the hand-over before the next request does: a failed preparation counts as
    // a retry pending by the time the next request looks.
    const outcome = handed.then(
      ({ attempt, answer }) => answer.then(() => succeeded(own), (error) => failed(error, attempt)),
      (error) => failed(error, null),
    );
    own.handedOver = handed.then(() => {}, () => {});
    if (holding) own.handedOver.then(() => held--);
    const settled = outcome.then(() => {}, () => {});
    own.finished = Promise.all([allBefore, settled]).then(() => {});
    settled.then(() => {
      if (--own.pending === 0 && keys.get(key) === own) keys.delete(key);
    });
    return outcome;
  }

  return { apply, stop: () => stopped.abort() };
}

/** A stored request, as {@linkcode applyCountingAttempts} applies it. */
export interface StoredRequestApply {
  /** Its application or workspace: its requests are applied in arrival order. */
  key: string;
  /** Yields its attempt (see {@linkcode OrderedApply.apply}). */
  prepare: () => Promise<ApplyAttempt>;
  /** Names it in the failure's message ("WhatsApp delivery 17"). */
  label: string;
  /** Records a failed attempt in its row. */
  recordAttempt: (failure: string) => Promise<void>;
}

/**
 * Applies a stored request with `order` and, when that fails through its own fault, records the
 * failure with `recordAttempt` (an attempt: one that can never be applied stops being retried by
 * recovery after its last), then rejects with `Error("{label} failed: …")`. A deferred request
 * ({@linkcode ApplyDeferredError}) counts no attempt and rejects as it is.
 */
export async function applyCountingAttempts(
  order: OrderedApply,
  { key, prepare, label, recordAttempt }: StoredRequestApply,
): Promise<void> {
  try {
    await order.apply(key, prepare);
  } catch (error) {
    if (error instanceof ApplyDeferredError) throw error;
    const failure = messageOf(error);
    await recordAttempt(failure);
    throw new Error(`${label} failed: ${failure}`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A failure as {@linkcode OrderedApply.apply} judges it: one saying the database was not reached
 * becomes a {@linkcode RetryableApplyError}; any other is left as it is.
 */
export function asApplyFailure(error: unknown): unknown {
  if (error instanceof RetryableApplyError || !isTransientDatabaseError(error)) return error;
  return new RetryableApplyError((error as Error).message);
}
