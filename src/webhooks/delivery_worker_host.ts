/**
 * The main thread's handle on the delivery worker: starts it, wakes it when a change notice may
 * mean a new event (at most once per tick), and stops it after the attempts in flight.
 */
import type { DeliveryWorkerMessage, DeliveryWorkerReply } from "./delivery_protocol.ts";

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
  worker.postMessage(init);
  await ready;
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
      await stopped;
      worker.terminate();
    },
  };
}
