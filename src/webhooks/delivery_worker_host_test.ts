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

Deno.test("when one delivery worker fails to start, the ones that started are stopped", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // The sweeping worker (the first) never becomes ready; the others do, and note their stop.
    // Plain JavaScript, so that no type check delays them.
    const path = `${dir}/half_worker.js`;
    await Deno.writeTextFile(
      path,
      `self.onmessage = async (event) => {
        if (event.data.type === "init" && event.data.sweeps === null) {
          self.postMessage({ type: "ready" });
        }
        if (event.data.type === "stop") {
          await Deno.writeTextFile(${JSON.stringify(`${dir}/stopped`)}, "x\\n", { append: true });
          self.postMessage({ type: "stopped" });
        }
      };`,
    );
    const sweeps = { firstInMs: 60_000, everyMs: 60_000 };
    await assert.rejects(
      startDeliveryWorkers(3, { ...INIT, sweeps }, {
        workerUrl: new URL(`file://${path}`),
        startTimeoutMs: 3_000,
      }),
      { message: "The delivery worker was not ready within 3000 ms" },
    );
    assert.equal(await Deno.readTextFile(`${dir}/stopped`), "x\nx\n", "both ready workers stopped");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
