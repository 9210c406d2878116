/**
 * The main thread's handle on the delivery worker: starts it, wakes it when a change notice may
 * mean a new event (at most once per tick), and stops it after the attempts in flight.
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

/** Starts the worker; resolves once it is ready. */
export async function startDeliveryWorker(
  init: Extract<DeliveryWorkerMessage, { type: "init" }>,
): Promise<DeliveryWorker> {
  const worker = new Worker(WORKER_URL, { type: "module" });
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
  worker.postMessage(init);
  try {
    await Promise.race([ready, failed]);
  } catch (error) {
    worker.terminate();
    throw error;
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
