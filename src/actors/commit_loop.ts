/**
 * The scheduling half of a worker: one actor (a FIFO mailbox) per key, and a group-commit loop
 * that drains the ready actors of the whole worker into shared transactions. An actor is busy
 * while any of its commands is in an in-flight batch, so one key is never in two concurrent
 * transactions and its commands commit in mailbox order, while unrelated keys share batches.
 * Commands that arrive during a commit wait for the next batch, which is what makes batches grow
 * under load. A batch starts at once when none is in flight; next to one, only when it carries
 * at least `minConcurrentBatch` commands, because a transaction's fixed cost (in the worker and
 * in PostgreSQL) is many times a message's, and a near-empty one spent next to a full one only
 * takes CPU from it. A smaller one still starts after `concurrentWaitMs`, so that one stuck
 * transaction (say, waiting for another instance's lock) does not hold up every other key.
 * Once a command of a channel's stream (see {@linkcode StreamPlace}) failed retryably, its actor
 * refuses the stream's commands handed over before the failure was known, queued or still to
 * come, so that none is applied ahead of its retry. The database is reached only through the
 * injected `commit`, so every interleaving can be tested without one.
 */
import type { AppCommand, CommandResult, StreamPlace } from "./protocol.ts";
import { log } from "../log.ts";

/** Options of {@linkcode createCommitLoop}. */
export interface CommitLoopOptions {
  /** Commits `commands` in one transaction, one result per command; rejects if it failed whole. */
  commit: (commands: AppCommand[]) => Promise<CommandResult[]>;
  /** Most commands in one batch. @default 256 */
  maxBatch?: number;
  /** Most batches committing at once. @default 2 */
  maxInFlight?: number;
  /**
   * Fewest commands of a batch that starts while another is in flight (at most `maxBatch`);
   * smaller ones wait for a commit to finish. @default 32
   */
  minConcurrentBatch?: number;
  /** How long a smaller batch waits for the one in flight before it starts anyway. @default 25 */
  concurrentWaitMs?: number;
  /** An actor idle this long with an empty mailbox is evicted. @default 60_000 */
  idleMs?: number;
  /**
   * Whether an actor's part of a batch must end with `command`: the commands behind it wait for
   * the next batch, which sees everything it did. @default never
   */
  endsBatch?: (command: AppCommand) => boolean;
  /**
   * Whether a commit's error may pass (the database was not reached): a command failing alone with
   * one is answered {@linkcode UNAVAILABLE}. @default never
   */
  isRetryable?: (error: unknown) => boolean;
  /** Aborting it stops the loop, as {@linkcode CommitLoop.stop} does. @default undefined */
  signal?: AbortSignal;
}

/** A running commit loop. */
export interface CommitLoop {
  /** Queues `command` in the mailbox of actor `key`; resolves once it is committed (or failed). */
  submit(key: string, command: AppCommand): Promise<CommandResult>;
  /** Refuses new commands, finishes every queued and in-flight one, then resolves. */
  stop(): Promise<void>;
  /** How many actors exist now (for tests and metrics). */
  readonly actorCount: number;
}

/** The answer to a command whose transaction failed even alone. */
export const INTERNAL_ERROR: CommandResult = Object.freeze({
  ok: false,
  status: 500,
  message: "Internal server error",
});

/**
 * The answer to a command whose transaction failed for a reason that may pass: to clients the
 * same as {@linkcode INTERNAL_ERROR}, but a channel's stored request is tried again soon.
 */
export const UNAVAILABLE: CommandResult = Object.freeze({
  ok: false,
  status: 500,
  message: "Internal server error",
  retryable: true,
});

/**
 * Thrown by a commit whose COMMIT was sent but whose outcome could not be learnt (the connection
 * was lost, and the database could not be asked since). Its commands must not be tried again: they
 * may have committed. They are answered {@linkcode UNAVAILABLE}, so that a channel's stored request,
 * applied at most once whatever happens (deduplicated by its platform id), is tried again.
 */
export class CommitOutcomeUnknown extends Error {
  constructor(options?: ErrorOptions) {
    super("The batch's COMMIT was sent, but whether it took effect is unknown", options);
    this.name = "CommitOutcomeUnknown";
  }
}

/** The answer to a command submitted after {@linkcode CommitLoop.stop}. */
export const SHUTTING_DOWN: CommandResult = Object.freeze({
  ok: false,
  status: 503,
  message: "Service is shutting down",
});

interface Entry {
  command: AppCommand;
  answer: (result: CommandResult) => void;
}

interface Actor {
  key: string;
  mailbox: Entry[];
  busy: boolean;
  lastActive: number;
  /** Per stream, the latest epoch of a command that failed retryably: refused up to it. */
  fences?: Map<string, number>;
}

interface Taken {
  actor: Actor;
  entries: Entry[];
}

/** Starts a commit loop; nothing runs until the first {@linkcode CommitLoop.submit}. */
export function createCommitLoop(options: CommitLoopOptions): CommitLoop {
  const { commit, maxBatch = 256, maxInFlight = 2, idleMs = 60_000, signal } = options;
  const { endsBatch = () => false, isRetryable = () => false } = options;
  const { minConcurrentBatch = 32, concurrentWaitMs = 25 } = options;
  if (typeof commit !== "function") throw new TypeError("Cannot create commit loop: no commit");
  requirePositiveInteger("maxBatch", maxBatch);
  requirePositiveInteger("maxInFlight", maxInFlight);
  requirePositiveInteger("minConcurrentBatch", minConcurrentBatch);
  const concurrentThreshold = Math.min(minConcurrentBatch, maxBatch);
  if (!(concurrentWaitMs >= 0)) {
    throw new RangeError("Cannot create commit loop: concurrentWaitMs must not be negative");
  }
  if (!(idleMs > 0)) throw new RangeError("Cannot create commit loop: idleMs must be positive");

  const actors = new Map<string, Actor>();
  /** Not-busy actors with queued commands, in the order they became ready. */
  const ready = new Set<Actor>();
  /** Commands queued in the mailboxes of `ready`. */
  let readyCommands = 0;
  let state: "running" | "stopping" | "stopped" = "running";
  let inFlight = 0;
  let queued = 0;
  let pumpScheduled = false;
  /** Runs while a small batch waits next to one in flight; once it fired, the batch may start. */
  let waitTimer: ReturnType<typeof setTimeout> | undefined;
  let waited = false;
  let sweepTimer: ReturnType<typeof setInterval> | undefined;
  let drained: PromiseWithResolvers<void> | null = null;

  signal?.addEventListener("abort", () => void stop(), { once: true });

  function submit(key: string, command: AppCommand): Promise<CommandResult> {
    if (state !== "running") return Promise.resolve(SHUTTING_DOWN);
    let actor = actors.get(key);
    if (!actor) {
      actor = { key, mailbox: [], busy: false, lastActive: Date.now() };
      actors.set(key, actor);
      startSweep();
    }
    if (isFenced(actor, command)) return Promise.resolve(UNAVAILABLE);
    const { promise, resolve } = Promise.withResolvers<CommandResult>();
    actor.mailbox.push({ command, answer: resolve });
    queued++;
    if (!actor.busy) {
      ready.add(actor);
      readyCommands++;
    }
    schedulePump();
    return promise;
  }

  /** Deferred to a microtask so that commands submitted in one tick share a batch. */
  function schedulePump(): void {
    if (pumpScheduled) return;
    pumpScheduled = true;
    queueMicrotask(pump);
  }

  function pump(): void {
    pumpScheduled = false;
    while (inFlight < maxInFlight && ready.size > 0) {
      // The batch in flight schedules a pump when it finishes; the timer bounds the wait.
      if (inFlight > 0 && readyCommands < concurrentThreshold && !waited) {
        waitTimer ??= setTimeout(() => {
          waitTimer = undefined;
          waited = true;
          schedulePump();
        }, concurrentWaitMs);
        break;
      }
      clearTimeout(waitTimer);
      waitTimer = undefined;
      waited = false;
      inFlight++;
      void runBatch(takeBatch());
    }
    checkDrained();
  }

  /** Takes ready actors in arrival order, each one's commands in mailbox order. */
  function takeBatch(): Taken[] {
    const taken: Taken[] = [];
    let room = maxBatch;
    for (const actor of ready) {
      if (room === 0) break;
      readyCommands -= actor.mailbox.length; // busy from now on, so none of them is ready
      const end = actor.mailbox.findIndex((entry, i) => i < room && endsBatch(entry.command));
      const entries = actor.mailbox.splice(0, end === -1 ? room : end + 1);
      room -= entries.length;
      queued -= entries.length;
      actor.busy = true;
      ready.delete(actor);
      taken.push({ actor, entries });
    }
    return taken;
  }

  async function runBatch(taken: Taken[]): Promise<void> {
    const entries = taken.flatMap((part) => part.entries);
    try {
      let results: CommandResult[];
      try {
        results = trusted(await commit(entries.map((entry) => entry.command)), entries.length);
      } catch (error) {
        if (error instanceof CommitOutcomeUnknown) {
          // Perhaps committed: tried again, its commands could commit twice.
          logError("Batch outcome unknown", error);
          results = entries.map(() => UNAVAILABLE);
        } else {
          // The whole transaction rolled back: retry alone so that one bad command fails only
          // itself.
          results = await commitEachAlone(
            entries.map((entry) => entry.command),
            commitAlone,
            isRetryable,
            (error) => logError("Command failed alone after its batch failed", error),
          );
        }
      }
      entries.forEach((entry, index) => entry.answer(results[index]));
      let offset = 0;
      for (const { actor, entries } of taken) {
        fenceFailedStreams(actor, entries, results.slice(offset, offset += entries.length));
      }
    } finally {
      const now = Date.now();
      for (const { actor } of taken) {
        actor.busy = false;
        actor.lastActive = now;
        if (actor.mailbox.length > 0) {
          ready.add(actor);
          readyCommands += actor.mailbox.length;
        }
      }
      inFlight--;
      schedulePump();
    }
  }

  /**
   * Fences the streams of `actor`'s commands that failed retryably in a batch (`results` answer
   * `entries`), and refuses what its mailbox holds of them: those commands were handed over
   * before the failure was known, and would otherwise be applied ahead of its retry.
   */
  function fenceFailedStreams(actor: Actor, entries: Entry[], results: CommandResult[]): void {
    let fenced = false;
    entries.forEach(({ command }, index) => {
      const place = placeOf(command);
      const result = results[index];
      if (!place || result.ok || !result.retryable) return;
      actor.fences ??= new Map();
      actor.fences.set(place.stream, Math.max(place.epoch, actor.fences.get(place.stream) ?? 0));
      fenced = true;
    });
    // Only a batch that fenced something scans the mailbox: what arrived since an earlier fence
    // was checked on its way in (submit).
    if (!fenced) return;
    const kept: Entry[] = [];
    for (const entry of actor.mailbox) {
      if (isFenced(actor, entry.command)) entry.answer(UNAVAILABLE);
      else kept.push(entry);
    }
    queued -= actor.mailbox.length - kept.length;
    actor.mailbox = kept;
  }

  async function commitAlone(command: AppCommand): Promise<CommandResult> {
    const [result] = await commit([command]);
    if (!result) throw new Error("Commit returned no result");
    return result;
  }

  /**
   * The results of a committed batch. The transaction committed, so a bad answer must not lead to
   * a retry (it would commit twice); and results that do not line up one to one cannot be trusted
   * to belong to their command.
   */
  function trusted(results: CommandResult[], expected: number): CommandResult[] {
    if (Array.isArray(results) && results.length === expected) return results;
    logError(`Commit returned ${results?.length} results for ${expected} commands`, null);
    return Array.from({ length: expected }, () => INTERNAL_ERROR);
  }

  function startSweep(): void {
    if (sweepTimer !== undefined) return;
    const timer = setInterval(sweep, idleMs);
    Deno.unrefTimer(timer);
    sweepTimer = timer;
  }

  function stopSweep(): void {
    clearInterval(sweepTimer);
    sweepTimer = undefined;
  }

  /** One timer for all actors: evicts those idle for `idleMs` with nothing queued. */
  function sweep(): void {
    const cutoff = Date.now() - idleMs;
    for (const actor of actors.values()) {
      if (!actor.busy && actor.mailbox.length === 0 && actor.lastActive <= cutoff) {
        actors.delete(actor.key);
      }
    }
    if (actors.size === 0) stopSweep();
  }

  function checkDrained(): void {
    if (state !== "stopping" || inFlight > 0 || queued > 0 || pumpScheduled) return;
    state = "stopped";
    stopSweep();
    actors.clear();
    drained?.resolve();
  }

  function stop(): Promise<void> {
    if (!drained) {
      drained = Promise.withResolvers<void>();
      if (state === "running") state = "stopping";
      checkDrained();
    }
    return drained.promise;
  }

  return {
    submit,
    stop,
    get actorCount() {
      return actors.size;
    },
  };
}

/**
 * Commits each of `commands` alone with `commitOne`, in order, after the transaction they shared
 * failed, so that one bad command fails only itself: one whose error `isRetryable` says may pass
 * answers {@linkcode UNAVAILABLE}, any other failure {@linkcode INTERNAL_ERROR} (`onError` hears
 * each). Once an application's command failed retryably, its commands behind it are not tried
 * but answered UNAVAILABLE: they would likely fail the same way (each perhaps after a connect
 * timeout), and one that succeeded would be applied before it.
 */
export async function commitEachAlone(
  commands: AppCommand[],
  commitOne: (command: AppCommand) => Promise<CommandResult>,
  isRetryable: (error: unknown) => boolean,
  onError: (error: unknown) => void,
): Promise<CommandResult[]> {
  const unavailable = new Set<number>();
  const results: CommandResult[] = [];
  for (const command of commands) {
    if (unavailable.has(command.appId)) {
      results.push(UNAVAILABLE);
      continue;
    }
    try {
      results.push(await commitOne(command));
    } catch (error) {
      onError(error);
      const retryable = error instanceof CommitOutcomeUnknown || isRetryable(error);
      if (retryable) unavailable.add(command.appId);
      results.push(retryable ? UNAVAILABLE : INTERNAL_ERROR);
    }
  }
  return results;
}

/** Where `command` stands in a channel's stream, if a channel's stored request made it. */
function placeOf(command: AppCommand): StreamPlace | undefined {
  return "order" in command ? command.order : undefined;
}

/** Whether `actor` refuses `command`: its stream failed at its epoch or a later one. */
function isFenced(actor: Actor, command: AppCommand): boolean {
  const place = placeOf(command);
  const fence = place && actor.fences?.get(place.stream);
  return fence !== undefined && place !== undefined && place.epoch <= fence;
}

function requirePositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`Cannot create commit loop: ${name} must be a positive integer`);
  }
}

/** One JSON line; the error's name and message only, never the command (it holds user content). */
function logError(message: string, error: unknown): void {
  const cause = error instanceof Error
    ? { name: error.name, message: error.message }
    : error === null
    ? undefined
    : { message: String(error) };
  log("error", message, { source: "commit_loop", cause });
}
