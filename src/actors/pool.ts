/**
 * The main-thread side of the actors: a fixed pool of module workers, each running a commit
 * loop, and the routing that sends every command of one actor key to the same worker (so that
 * the worker alone orders that key's writes). It also keeps the promise that nothing hangs: a
 * worker that crashes fails its pending asks with 500 at once and is replaced, and an ask that
 * outlives `askTimeoutMs` fails the same way.
 *
 * A `postMessage` costs both threads far more than the few commands it carries, so asks travel
 * in groups: an ask to an idle worker leaves at the end of the tick, but while a worker has asks
 * unanswered (it is committing), new ones wait until it answers or `coalesceMs` passes, whichever
 * comes first. The worker could not start their batch sooner anyway: it forms the next one when
 * a commit finishes.
 */
import type { AppCommand, Ask, CommandResult, FromWorker, ToWorker } from "./protocol.ts";
import { log, type LogLevel } from "../log.ts";
import { INTERNAL_ERROR, SHUTTING_DOWN, UNAVAILABLE } from "./commit_loop.ts";

/** Options of {@linkcode createActorPool}. */
export interface ActorPoolOptions {
  /** How many workers to run. */
  size: number;
  /** Database each worker connects to. */
  databaseUrl: string;
  /** The workers' log level. @default "info" */
  logLevel?: LogLevel | "silent";
  /** Module the workers run. @default the URL of `workers/app_worker.ts` */
  workerUrl?: URL;
  /** An ask unanswered this long resolves to a 500. @default 30_000 */
  askTimeoutMs?: number;
  /** How long the workers may take to become ready before creating the pool fails. @default 30_000 */
  startTimeoutMs?: number;
  /** How long {@linkcode ActorPool.stop} waits for a worker to drain before terminating it. @default 10_000 */
  stopTimeoutMs?: number;
  /** Longest an ask waits to travel with others while its worker is busy. @default 1 */
  coalesceMs?: number;
}

/** The running workers, addressed by actor key. */
export interface ActorPool {
  /** Sends `command` to actor `key`; resolves with its result, never rejects. */
  ask(key: string, command: AppCommand): Promise<CommandResult>;
  /** Refuses new asks, lets every worker drain, then terminates them. */
  stop(): Promise<void>;
}

const DEFAULT_WORKER_URL = new URL("../../workers/app_worker.ts", import.meta.url);
const MAX_RESTART_DELAY_MS = 5_000;

interface Pending {
  resolve: (result: CommandResult) => void;
  deadline: number;
}

interface Slot {
  index: number;
  /** `null` while waiting to be restarted after repeated crashes, or once stopped. */
  worker: Worker | null;
  /** Asks sent to this slot's worker, in sending (and so deadline) order. */
  pending: Map<number, Pending>;
  /** Asks not yet sent (they are in `pending` already). */
  outbox: Ask[];
  /** When set, the outbox leaves then (or sooner, with the worker's next answer). */
  flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** Whether the outbox leaves at the end of this tick. */
  flushQueued: boolean;
  ready: boolean;
  /** Crashes since the last `ready`: a worker that cannot start is restarted ever more slowly. */
  crashes: number;
  restartTimer: ReturnType<typeof setTimeout> | undefined;
  /** Settled by the first `ready` (or crash) while the pool is being created. */
  starting: PromiseWithResolvers<void> | null;
  stopped: PromiseWithResolvers<void> | null;
}

/**
 * The worker index of actor `key` among `size` workers: FNV-1a (32-bit, over UTF-16 code
 * units, which for ASCII keys is the byte-wise hash) modulo `size`. Pure and stable.
 */
export function workerIndexFor(key: string, size: number): number {
  if (!Number.isInteger(size) || size < 1) {
    throw new RangeError("Cannot route actor key: size must be a positive integer");
  }
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % size;
}

/** Spawns `size` workers, initialises them, and resolves once every one is ready. */
export async function createActorPool(options: ActorPoolOptions): Promise<ActorPool> {
  const { size, databaseUrl, workerUrl = DEFAULT_WORKER_URL, logLevel = "info" } = options;
  const {
    askTimeoutMs = 30_000,
    startTimeoutMs = 30_000,
    stopTimeoutMs = 10_000,
    coalesceMs = 1,
  } = options;
  if (!Number.isInteger(size) || size < 1) {
    throw new RangeError("Cannot create actor pool: size must be a positive integer");
  }
  if (typeof databaseUrl !== "string" || databaseUrl === "") {
    throw new TypeError("Cannot create actor pool: databaseUrl is required");
  }
  if (!(askTimeoutMs > 0) || !(startTimeoutMs > 0) || !(stopTimeoutMs > 0)) {
    throw new RangeError("Cannot create actor pool: timeouts must be positive");
  }
  if (!(coalesceMs >= 0)) {
    throw new RangeError("Cannot create actor pool: coalesceMs must not be negative");
  }

  let state: "starting" | "running" | "stopping" | "stopped" = "starting";
  let nextId = 1;
  let stopping: Promise<void> | null = null;
  const slots: Slot[] = Array.from({ length: size }, (_, index) => ({
    index,
    worker: null,
    pending: new Map(),
    outbox: [],
    flushTimer: undefined,
    flushQueued: false,
    ready: false,
    crashes: 0,
    restartTimer: undefined,
    starting: Promise.withResolvers<void>(),
    stopped: null,
  }));

  function spawn(slot: Slot): void {
    slot.restartTimer = undefined;
    slot.ready = false;
    let worker: Worker;
    try {
      worker = new Worker(workerUrl, { type: "module" });
    } catch (error) {
      crash(slot, null, error);
      return;
    }
    slot.worker = worker;
    worker.onmessage = (event: MessageEvent<FromWorker>) => {
      if (slot.worker === worker) receive(slot, event.data);
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault(); // or the error would take the whole process down
      if (slot.worker === worker) crash(slot, worker, event.message);
    };
    worker.onmessageerror = () => {
      if (slot.worker === worker) crash(slot, worker, "Message from worker could not be read");
    };
    send(worker, { type: "init", databaseUrl, workerIndex: slot.index, logLevel });
  }

  function receive(slot: Slot, message: FromWorker): void {
    switch (message.type) {
      case "ready":
        slot.ready = true;
        slot.crashes = 0;
        slot.starting?.resolve();
        break;
      case "reply":
        for (const { id, result } of message.replies) {
          const pending = slot.pending.get(id);
          slot.pending.delete(id);
          pending?.resolve(result); // a late reply to a timed-out ask finds nothing
        }
        // A commit finished: the worker forms its next batch now, from what it has.
        flush(slot);
        break;
      case "stuck":
        crash(slot, slot.worker, message.message, { retryable: true });
        break;
      case "stopped":
        slot.stopped?.resolve();
        break;
    }
  }

  /**
   * Replaces a worker that died, answering its pending asks with a 500: retryable when the
   * worker said its transaction was lost (none of the commands is to blame), else not — the
   * command may be what killed it, and would kill it again.
   */
  function crash(
    slot: Slot,
    worker: Worker | null,
    cause: unknown,
    { retryable = false }: { retryable?: boolean } = {},
  ): void {
    logError("Actor worker crashed", slot.index, cause);
    worker?.terminate();
    slot.worker = null;
    slot.outbox = [];
    clearTimeout(slot.flushTimer);
    slot.flushTimer = undefined;
    failPending(slot, retryable ? UNAVAILABLE : INTERNAL_ERROR);
    if (slot.starting) {
      slot.starting.reject(
        new Error(`Cannot start actor worker ${slot.index}: ${describe(cause)}`),
      );
      return;
    }
    if (state !== "running") {
      slot.stopped?.resolve();
      return;
    }
    // A worker that dies before it is ready would die again at once: back off instead of spinning.
    const delay = slot.ready ? 0 : Math.min(100 * 2 ** slot.crashes, MAX_RESTART_DELAY_MS);
    slot.crashes++;
    if (delay === 0) spawn(slot);
    else slot.restartTimer = setTimeout(() => spawn(slot), delay);
  }

  function failPending(slot: Slot, result: CommandResult = INTERNAL_ERROR): void {
    for (const pending of slot.pending.values()) pending.resolve(result);
    slot.pending.clear();
  }

  function ask(key: string, command: AppCommand): Promise<CommandResult> {
    if (state !== "running") return Promise.resolve(SHUTTING_DOWN);
    const slot = slots[workerIndexFor(key, size)];
    // The worker is being replaced: the command was never sent, and may succeed once it is back.
    if (!slot.worker) return Promise.resolve(UNAVAILABLE);
    const id = nextId++;
    const { promise, resolve } = Promise.withResolvers<CommandResult>();
    // Asks sent earlier and still unanswered mean the worker is busy committing.
    const busy = slot.pending.size > slot.outbox.length;
    slot.pending.set(id, { resolve, deadline: performance.now() + askTimeoutMs });
    slot.outbox.push({ id, key, command });
    if (!busy || coalesceMs === 0) {
      if (!slot.flushQueued) {
        slot.flushQueued = true;
        queueMicrotask(() => flush(slot));
      }
    } else {
      slot.flushTimer ??= setTimeout(() => flush(slot), coalesceMs);
    }
    return promise;
  }

  /** Sends the slot's waiting asks to its worker in one message. */
  function flush(slot: Slot): void {
    slot.flushQueued = false;
    clearTimeout(slot.flushTimer);
    slot.flushTimer = undefined;
    if (slot.outbox.length === 0) return;
    const asks = slot.outbox;
    slot.outbox = [];
    try {
      if (!slot.worker) throw new Error("Worker is gone");
      send(slot.worker, { type: "ask", asks });
    } catch (error) {
      // One command that cannot be cloned (too deep a document, say) must not fail the others
      // sent with it, whoever they came from: each goes again on its own.
      if (slot.worker && asks.length > 1) {
        for (const ask of asks) sendAlone(slot, ask);
        return;
      }
      logError("Cannot send commands to actor worker", slot.index, error);
      for (const { id } of asks) fail(slot, id);
    }
  }

  function sendAlone(slot: Slot, ask: Ask): void {
    try {
      send(slot.worker!, { type: "ask", asks: [ask] });
    } catch (error) {
      logError("Cannot send a command to actor worker", slot.index, error);
      fail(slot, ask.id);
    }
  }

  function fail(slot: Slot, id: number): void {
    const pending = slot.pending.get(id);
    slot.pending.delete(id);
    pending?.resolve(INTERNAL_ERROR);
  }

  /** One timer for every ask: the oldest pending asks come first, so a sweep stops early. */
  function expireAsks(): void {
    const now = performance.now();
    for (const slot of slots) {
      for (const [id, pending] of slot.pending) {
        if (pending.deadline > now) break;
        slot.pending.delete(id);
        pending.resolve(INTERNAL_ERROR);
      }
    }
  }

  async function stopSlot(slot: Slot): Promise<void> {
    clearTimeout(slot.restartTimer);
    const worker = slot.worker;
    if (worker) {
      slot.stopped = Promise.withResolvers<void>();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<void>((resolve) => timer = setTimeout(resolve, stopTimeoutMs));
      send(worker, { type: "stop" });
      await Promise.race([slot.stopped.promise, timeout]);
      clearTimeout(timer);
      worker.terminate();
      slot.worker = null;
    }
    failPending(slot);
  }

  function stop(): Promise<void> {
    stopping ??= (async () => {
      state = "stopping";
      slots.forEach(flush); // asks made before stop() go ahead of the stop message
      await Promise.all(slots.map(stopSlot));
      clearInterval(sweepTimer);
      state = "stopped";
    })();
    return stopping;
  }

  for (const slot of slots) {
    slot.starting!.promise.catch(() => {}); // awaited below; this only marks it handled
    spawn(slot);
  }
  let startTimer: ReturnType<typeof setTimeout> | undefined;
  const startTimeout = new Promise<never>((_, reject) => {
    startTimer = setTimeout(
      () => reject(new Error("Cannot start actor pool: workers did not become ready in time")),
      startTimeoutMs,
    );
  });
  try {
    await Promise.race([Promise.all(slots.map((slot) => slot.starting!.promise)), startTimeout]);
  } catch (error) {
    state = "stopped";
    for (const slot of slots) slot.worker?.terminate();
    throw error;
  } finally {
    clearTimeout(startTimer);
  }
  for (const slot of slots) slot.starting = null;
  const sweepTimer = setInterval(expireAsks, Math.min(1_000, Math.max(5, askTimeoutMs / 10)));
  state = "running";
  return { ask, stop };
}

function send(worker: Worker, message: ToWorker): void {
  worker.postMessage(message);
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

function logError(message: string, workerIndex: number, cause: unknown): void {
  log("error", message, { source: "actor_pool", workerIndex, cause: describe(cause) });
}
