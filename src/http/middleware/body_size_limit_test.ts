import assert from "node:assert/strict";
import { Hono } from "hono";
import {
  arrivedWithin,
  BODY_NOT_RECEIVED,
  bodySizeLimit,
  readRequestBody,
  readWithin,
} from "./body_size_limit.ts";
import { AppError } from "../../domain/app_error.ts";
import { exchange as exchangeRaw } from "../../../tests/support/raw_http.ts";

function appWithLimit(maxBytes: number): Hono {
  const app = new Hono();
  app.use(bodySizeLimit(maxBytes));
  app.post("/", async (c) => c.text(`got ${(await c.req.text()).length}`));
  app.onError((error) =>
    new Response(error.message, { status: error instanceof AppError ? error.status : 500 })
  );
  return app;
}

function streamOf(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

Deno.test("bodySizeLimit() judges a declared length by the header", async () => {
  const app = appWithLimit(10);
  const fits = await app.request("/", {
    method: "POST",
    body: "0123456789",
    headers: { "content-length": "10" },
  });
  assert.equal(fits.status, 200);
  assert.equal(await fits.text(), "got 10");
  const over = await app.request("/", {
    method: "POST",
    body: "x",
    headers: { "content-length": "11" },
  });
  assert.equal(over.status, 413);
  assert.equal(await over.text(), "Request body too large");
});

Deno.test("bodySizeLimit() counts a streamed body and hands it on whole", async () => {
  const app = appWithLimit(10);
  const fits = await app.request("/", { method: "POST", body: streamOf("01234", "56789") });
  assert.equal(fits.status, 200);
  assert.equal(await fits.text(), "got 10");
  const over = await app.request("/", { method: "POST", body: streamOf("012345", "678901") });
  assert.equal(over.status, 413);
});

Deno.test("bodySizeLimit() hands a streamed body on with the request's method and headers", async () => {
  const app = appWithLimit(10);
  app.put(
    "/echo",
    async (c) => c.text(`${c.req.method} ${c.req.header("x-one")} ${await c.req.text()}`),
  );
  const answer = await app.request("/echo", {
    method: "PUT",
    headers: { "x-one": "1" },
    body: streamOf("ab", "c"),
  });
  assert.equal(await answer.text(), "PUT 1 abc");
});

Deno.test("bodySizeLimit() lets bodiless requests through and refuses a bad limit", async () => {
  const app = appWithLimit(0);
  app.get("/", (c) => c.text("fine"));
  assert.equal(await (await app.request("/")).text(), "fine");
  assert.throws(() => bodySizeLimit(-1), RangeError);
  assert.throws(() => bodySizeLimit(1.5), RangeError);
});

Deno.test("readWithin() joins a body's chunks, refuses one too large and gives up on one that stalls", async () => {
  const whole = await readWithin(streamOf("ab", "", "cde"), { maxBytes: 5 });
  assert.equal(new TextDecoder().decode(whole), "abcde");
  await assert.rejects(
    () => readWithin(streamOf("abc", "def"), { maxBytes: 5 }),
    (error: AppError) => error.status === 413,
  );
  let cancelled = false;
  const stalled = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("a"));
    },
    cancel() {
      cancelled = true;
    },
  });
  await assert.rejects(
    () => readWithin(stalled, { maxBytes: 5, deadlineMs: 50 }),
    (error: AppError) =>
      error.status === 408 && error.message === "Request body not received in time",
  );
  assert.equal(cancelled, true);
});

Deno.test("arrivedWithin() answers 408 to a declared body that stops short", async () => {
  const app = new Hono();
  app.post("/", async (c) => {
    const bytes = await arrivedWithin(c.req.arrayBuffer(), 100);
    return c.text(`got ${bytes.byteLength}`);
  });
  app.onError((error) =>
    new Response(error.message, { status: error instanceof AppError ? error.status : 500 })
  );
  await using server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, app.fetch);

  const exchange = (request: string) => exchangeRaw(server.addr.port, request);
  // The server holds that connection until the client ends it (Deno's HTTP/1.1 server waits for
  // the declared body), but the request itself is over: its handler has answered.
  const short = await exchange("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n1234567");
  assert.match(short, /^HTTP\/1\.1 408 /);
  assert.match(short, /Request body not received in time$/);
  const whole = await exchange("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  assert.match(whole, /^HTTP\/1\.1 200 /);
  assert.match(whole, /got 3$/);
  await assert.rejects(
    () => arrivedWithin(new Promise(() => {}), 10),
    (error: AppError) => error.status === 408,
  );
  assert.equal(await arrivedWithin(Promise.resolve(7), 10), 7);
});

Deno.test("a body whose client closed the connection before it arrived is 400, not the server's failure", async () => {
  const failures: unknown[] = [];
  await using server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    async (request) => {
      try {
        // The declared body as the routes read it; the chunked one through the stream.
        await (request.headers.has("content-length")
          ? arrivedWithin(request.arrayBuffer(), 5_000)
          : readRequestBody(request, 1_000));
      } catch (error) {
        failures.push(error);
        return new Response(null, { status: error instanceof AppError ? error.status : 500 });
      }
      return new Response("answered");
    },
  );
  for (
    const start of [
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n1234567",
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n",
    ]
  ) {
    const conn = await Deno.connect({ port: server.addr.port, hostname: "127.0.0.1" });
    await conn.write(new TextEncoder().encode(start));
    await new Promise((resolve) => setTimeout(resolve, 50));
    conn.close();
  }
  // A client that closes only its sending side still reads the answer.
  {
    using conn = await Deno.connect({ port: server.addr.port, hostname: "127.0.0.1" });
    await conn.write(
      new TextEncoder().encode("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n123"),
    );
    await conn.closeWrite();
    const buffer = new Uint8Array(1024);
    const read = await conn.read(buffer);
    assert.match(new TextDecoder().decode(buffer.subarray(0, read ?? 0)), /^HTTP\/1\.1 400 /);
  }
  const deadline = Date.now() + 4_000;
  while (failures.length < 3 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.equal(failures.length, 3);
  for (const failure of failures) {
    assert.ok(failure instanceof AppError);
    assert.equal(failure.status, 400);
    assert.equal(failure.message, BODY_NOT_RECEIVED);
  }
  // Any other failure of a read is the server's own, passed on as it is.
  const misuse = new TypeError("Body already consumed");
  await assert.rejects(() => arrivedWithin(Promise.reject(misuse), 1_000), (e) => e === misuse);
});

Deno.test("readRequestBody() refuses a declared length over the limit unread, and reads the rest", async () => {
  let pulled = false;
  const declared = new Request("http://x/", {
    method: "POST",
    headers: { "content-length": "11" },
    body: new ReadableStream({
      pull() {
        pulled = true;
      },
    }, { highWaterMark: 0 }),
  });
  await assert.rejects(
    () => readRequestBody(declared, 10),
    (error: AppError) => error.status === 413,
  );
  assert.equal(pulled, false);
  const body = await readRequestBody(
    new Request("http://x/", { method: "POST", body: streamOf("ab", "c") }),
    10,
  );
  assert.equal(new TextDecoder().decode(body), "abc");
  await assert.rejects(
    () => readRequestBody(new Request("http://x/", { method: "POST", body: streamOf("abc") }), 2),
    (error: AppError) => error.status === 413,
  );
  assert.equal((await readRequestBody(new Request("http://x/"), 10)).length, 0);
});
