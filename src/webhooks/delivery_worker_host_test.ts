import assert from "node:assert/strict";
import { startDeliveryWorkers } from "./delivery_worker_host.ts";
import type { DeliveryWorkerMessage } from "./delivery_protocol.ts";

const INIT: Extract<DeliveryWorkerMessage, { type: "init" }> = {
  type: "init",
  databaseUrl: "postgres://unused@127.0.0.1:1/unused",
  encryptionKey: new Uint8Array(32),
  allowPrivateHosts: null,
  logLevel: "silent",
  sweeps: null,
  whatsappGraphUrl: "https://graph.invalid/",
  slackApiUrl: "https://slack.invalid/api/",
};

/** A worker module answering `init` with `ready` only when `ready` is true, and `stop` always. */
async function workerModule(dir: string, ready: boolean): Promise<URL> {
  const path = `${dir}/${ready ? "ready" : "silent"}_worker.ts`;
  await Deno.writeTextFile(
    path,
    `self.onmessage = (event) => {
      if (event.data.type === "init" && ${ready}) self.postMessage({ type: "ready" });
      if (event.data.type === "stop") self.postMessage({ type: "stopped" });
    };`,
  );
  return new URL(`file://${path}`);
}

Deno.test("a delivery worker that never becomes ready fails the start in time", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const workerUrl = await workerModule(dir, false);
    const started = Date.now();
    await assert.rejects(
      startDeliveryWorkers(2, INIT, { workerUrl, startTimeoutMs: 300 }),
      { message: "The delivery worker was not ready within 300 ms" },
    );
    assert.ok(Date.now() - started < 10_000);

    const ready = await startDeliveryWorkers(2, INIT, {
      workerUrl: await workerModule(dir, true),
      startTimeoutMs: 10_000,
    });
    await ready.stop();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
