import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { fetchMedia } from "./media_fetch.ts";

/** A local upstream answering with `handler`; disposing of it stops it. */
function serve(handler: (request: Request) => Response | Promise<Response>) {
  const controller = new AbortController();
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", signal: controller.signal, onListen: () => {} },
    handler,
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/file`,
    async [Symbol.asyncDispose]() {
      controller.abort();
      await server.finished;
    },
  };
}

Deno.test("fetchMedia streams the file and asks for it unencoded", async () => {
  let asked: string | null = null;
  await using upstream = serve((request) => {
    asked = request.headers.get("accept-encoding");
    return new Response("x".repeat(100_000), { headers: { "content-type": "text/plain" } });
  });
  const response = await fetchMedia(upstream.url, { headers: { authorization: "Bearer t" } });
  assert.equal(asked, "identity");
  assert.equal((await response.text()).length, 100_000);
});

Deno.test("fetchMedia hands over a body encoded anyway as it came, with its encoding", async () => {
  const encoded = new Uint8Array(gzipSync(new TextEncoder().encode("y".repeat(100_000))));
  await using upstream = serve(() =>
    new Response(encoded, {
      headers: { "content-encoding": "gzip", "content-length": String(encoded.length) },
    })
  );
  const response = await fetchMedia(upstream.url, { headers: {} });
  assert.equal(response.headers.get("content-encoding"), "gzip");
  assert.equal(response.headers.get("content-length"), String(encoded.length));
  assert.deepEqual(new Uint8Array(await response.arrayBuffer()), encoded);
});

Deno.test("fetchMedia gives up on an upstream that never answers", async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  await using upstream = serve(async () => {
    await held;
    return new Response("late");
  });
  const started = Date.now();
  await assert.rejects(fetchMedia(upstream.url, { headers: {} }, { headersMs: 200 }));
  assert.ok(Date.now() - started < 5_000);
  release();
});

Deno.test("fetchMedia ends a body that stalls, and keeps one that keeps coming", async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  await using upstream = serve((request) => {
    const slow = new URL(request.url).searchParams.has("slow");
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode("first "));
        if (slow) {
          // Six more chunks, each 200 ms apart: slower in all than the idle limit, never idle.
          for (let i = 0; i < 6; i++) {
            await new Promise((resolve) => setTimeout(resolve, 200));
            controller.enqueue(new TextEncoder().encode("more "));
          }
          controller.close();
          return;
        }
        await held;
        controller.close();
      },
    });
    return new Response(body);
  });
  const stalled = await fetchMedia(upstream.url, { headers: {} }, { idleMs: 300 });
  await assert.rejects(stalled.text());
  release();
  const steady = await fetchMedia(`${upstream.url}?slow`, { headers: {} }, { idleMs: 1_000 });
  assert.equal(await steady.text(), "first more more more more more more ");
});

Deno.test("fetchMedia ends a large body that stalls while it is being read", async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  const size = 16 * 1024 * 1024;
  await using upstream = serve(() => {
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        for (let sent = 0; sent < size / 2; sent += 65_536) {
          controller.enqueue(new Uint8Array(65_536));
        }
        await held;
        controller.close();
      },
    });
    return new Response(body, { headers: { "content-length": String(size) } });
  });
  try {
    const response = await fetchMedia(upstream.url, { headers: {} }, { idleMs: 300 });
    const ended = response.arrayBuffer().then(() => "whole", (error) => String(error));
    const hung = new Promise((resolve) => setTimeout(resolve, 5_000, "still waiting"));
    assert.equal(await Promise.race([ended, hung]), "Error: The download stalled");
  } finally {
    release();
  }
});

Deno.test("fetchMedia lets a reader pause longer than the idle limit", async () => {
  await using upstream = serve(() => new Response("z".repeat(4 * 1024 * 1024)));
  const response = await fetchMedia(upstream.url, { headers: {} }, { idleMs: 200 });
  const reader = response.body!.getReader();
  let bytes = (await reader.read()).value!.length;
  await new Promise((resolve) => setTimeout(resolve, 600));
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    bytes += chunk.value.length;
  }
  assert.equal(bytes, 4 * 1024 * 1024);
});

Deno.test("fetchMedia ends a download its reader stopped reading, and the platform's side of it", async () => {
  const ended = Promise.withResolvers<void>();
  await using upstream = serve(() => {
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(new Uint8Array(65_536));
      },
      cancel() {
        ended.resolve();
      },
    });
    return new Response(body);
  });
  const response = await fetchMedia(upstream.url, { headers: {} }, {
    idleMs: 5_000,
    readerIdleMs: 300,
  });
  const reader = response.body!.getReader();
  await reader.read();
  await new Promise((resolve) => setTimeout(resolve, 600));
  // What was already queued may still come; then the end.
  const rest = async () => {
    for (let chunk = 0; chunk < 64; chunk++) if ((await reader.read()).done) return "done";
    return "still coming";
  };
  await assert.rejects(rest(), /The reader stopped reading/);
  await ended.promise;
});

Deno.test("fetchMedia leaves no timer behind when the reader cancels", async () => {
  await using upstream = serve(() => new Response("z".repeat(1_000_000)));
  const response = await fetchMedia(upstream.url, { headers: {} }, { idleMs: 60_000 });
  await response.body!.cancel();
  // The test's sanitizers fail it if the idle timer were still pending.
});

Deno.test("fetchMedia never follows a redirect", async () => {
  await using upstream = serve(() =>
    new Response(null, { status: 302, headers: { location: "http://127.0.0.1:1/elsewhere" } })
  );
  await assert.rejects(fetchMedia(upstream.url, { headers: { authorization: "Bearer t" } }));
});
