import assert from "node:assert/strict";
import { serveKept } from "./kept_server.ts";
import { setLogLevel } from "../log.ts";
import { waitUntil } from "../../tests/support/realtime.ts";

setLogLevel("silent"); // the failures these tests cause are logged as errors

/** A fake `Deno.serve`: the first server's listener fails; later ones cannot listen (port taken). */
function failingServe(freeAfter: number) {
  const calls: number[] = [];
  const failed = Promise.withResolvers<void>();
  const serve = (options: Deno.ServeTcpOptions) => {
    calls.push(options.port ?? -1);
    if (calls.length === 1) {
      options.onListen?.({ transport: "tcp", hostname: "0.0.0.0", port: 43210 });
      return { finished: failed.promise, shutdown: () => Promise.resolve() };
    }
    if (calls.length <= freeAfter) throw new Deno.errors.AddrInUse("Address already in use");
    return { finished: new Promise<void>(() => {}), shutdown: () => Promise.resolve() };
  };
  return { serve, calls, fail: () => failed.reject(new Error("Too many open files")) };
}

Deno.test("serveKept() listens again on the same port after its listener failed", async () => {
  const fake = failingServe(3);
  const server = await serveKept({
    port: 0,
    hostname: "0.0.0.0",
    handler: () => new Response("ok"),
    retryDelaysMs: [5],
    serve: fake.serve,
  });
  assert.equal(server.port, 43210);
  fake.fail();
  await waitUntil(() => fake.calls.length >= 4, "the third try");
  await new Promise((resolve) => setTimeout(resolve, 50)); // no try after it listens
  assert.deepEqual(fake.calls, [0, 43210, 43210, 43210], "two tries refused, the third listens");
  await server.shutdown();
});

Deno.test("serveKept() gives up when it cannot listen again within giveUpAfterMs", async () => {
  const fake = failingServe(Infinity);
  const gaveUp = Promise.withResolvers<Error>();
  const server = await serveKept({
    port: 0,
    hostname: "0.0.0.0",
    handler: () => new Response("ok"),
    retryDelaysMs: [5],
    giveUpAfterMs: 40,
    onGiveUp: gaveUp.resolve,
    serve: fake.serve,
  });
  fake.fail();
  const error = await gaveUp.promise;
  assert.ok(error instanceof Deno.errors.AddrInUse);
  const tries = fake.calls.length;
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(fake.calls.length, tries, "no more tries after giving up");
  await server.shutdown();
});

Deno.test("serveKept() pauses longer each time a listener back fails again soon", async () => {
  const calls: number[] = [];
  const serve = (options: Deno.ServeTcpOptions) => {
    calls.push(performance.now());
    options.onListen?.({ transport: "tcp", hostname: "0.0.0.0", port: 43210 });
    // The first listener and every one after it fail at once: the descriptors are still taken.
    return {
      finished: Promise.reject(new Error("Too many open files")),
      shutdown: () => Promise.resolve(),
    };
  };
  const server = await serveKept({
    port: 0,
    hostname: "0.0.0.0",
    handler: () => new Response("ok"),
    retryDelaysMs: [10, 40, 160],
    serve,
  });
  await new Promise((resolve) => setTimeout(resolve, 500));
  await server.shutdown();
  const pauses = calls.slice(1).map((at, i) => at - calls[i]);
  assert.ok(pauses.length >= 3 && pauses.length <= 5, `tries: ${pauses.length}`);
  assert.ok(pauses[1] >= 35 && pauses[2] >= 150, `pauses grow: ${pauses.join(", ")}`);
});
