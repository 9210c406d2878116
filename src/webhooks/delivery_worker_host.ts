/**
 * The main thread's handle on the delivery workers: starts them, wakes them when a change notice
 * may mean a new event (at most once per tick), and stops them after the attempts in flight.
 * Several workers claim from the same outbox (`FOR UPDATE SKIP LOCKED`), so deliveries get as
 * many threads as the machine has cores: one thread cannot keep up with what the actors commit.
 */
import type { DeliveryWorkerMessage, DeliveryWorkerReply } from "./delivery_protocol.ts";
import { log } from "../log.ts";

const WORKER_URL = new URL("../../workers/delivery_worker.ts", import.meta.url);

/** The running delivery worker. */
export interface DeliveryWorker {
  /** Something may have been queued: claim soon. */
  wake(): void;
  stop(): Promise<void>;
}

/** Options of {@linkcode startDeliveryWorkers}. */
export interface DeliveryWorkerStartOptions {
  /**
   * A worker not ready this long after it was created fails the start (it is ended): a start
   * fails loudly rather than waits forever on a thread whose module never loads. @default 30_000
   */
  startTimeoutMs?: number;
  /** The worker's module (tests start others). @default workers/delivery_worker.ts */
  workerUrl?: URL;
}

/**
 * Starts `count` workers at once (the first one sweeps old records, as `init.sweeps` says);
 * resolves once all are ready, and rejects if one fails or is not ready in time, after ending
 * the others.
 */
export async function startDeliveryWorkers(
  count: number,
  init: Extract<DeliveryWorkerMessage, { type: "init" }>,
  options: DeliveryWorkerStartOptions = {},
): Promise<DeliveryWorker> {
  const { startTimeoutMs = 30_000, workerUrl = WORKER_URL } = options;
  const starts = await Promise.allSettled(
    Array.from({ length: count }, (_, index) => {
      const sweeps = index === 0 ? init.sweeps : null;
      return startDeliveryWorker({ ...init, sweeps }, workerUrl, startTimeoutMs);
    }),
  );
  const workers = starts.flatMap((start) => start.status === "fulfilled" ? [start.value] : []);
  const failed = starts.find((start) => start.status === "rejected");
  if (failed !== undefined) {
    await Promise.all(workers.map((worker) => worker.stop()));
    throw failed.reason;
  }
  return {
    wake: () => workers.forEach((worker) => worker.wake()),
    stop: async () => {
      await Promise.all(workers.map((worker) => worker.stop()));
    },
  };
}

/** Starts one worker; resolves once it is ready. */
async function startDeliveryWorker(
  init: Extract<DeliveryWorkerMessage, { type: "init" }>,
  workerUrl: URL,
  startTimeoutMs: number,
): Promise<DeliveryWorker> {
  const worker = new Worker(workerUrl, { type: "module" });
  const replies = new Map<DeliveryWorkerReply["type"], () => void>();
  worker.onmessage = (event: MessageEvent<DeliveryWorkerReply>) => replies.get(event.data.type)?.();
  const answered = (type: DeliveryWorkerReply["type"]) =>
    new Promise<void>((resolve) => replies.set(type, resolve));
  const ready = answered("ready");
  const failed = new Promise<never>((_, reject) => {
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(`The delivery worker failed: ${event.message}`));
    };
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`The delivery worker was not ready within ${startTimeoutMs} ms`)),
      startTimeoutMs,
    );
  });
  worker.postMessage(init);
  try {
    await Promise.race([ready, failed, late]);
  } catch (error) {
    worker.terminate();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  // Later crashes are logged; deliveries wait in the outbox for the next start.
  worker.onerror = (event) => {
    event.preventDefault();
    log("error", "delivery worker crashed", { error: event.message });
  };
  let wakePending = false;
  return {
    wake() {
      if (wakePending) return;
      wakePending = true;
      queueMicrotask(() => {
        wakePending = false;
        worker.postMessage({ type: "wake" } satisfies DeliveryWorkerMessage);
      });
    },
    async stop() {
      const stopped = answered("stopped");
      worker.postMessage({ type: "stop" } satisfies DeliveryWorkerMessage);
      // Attempts in flight end within their 10 s timeout; a crashed worker never answers.
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([stopped, new Promise((resolve) => timer = setTimeout(resolve, 15_000))]);
      clearTimeout(timer);
      worker.terminate();
    },
  };
}
