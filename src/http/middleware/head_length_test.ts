import assert from "node:assert/strict";
import { Hono } from "hono";
import { headLength } from "./head_length.ts";
import { errorResponse } from "../envelope.ts";
import { exchange } from "../../../tests/support/raw_http.ts";

/** Sends `HEAD path` on its own connection and returns the raw answer, head and any body. */
function head(port: number, path: string): Promise<string> {
  return exchange(port, `HEAD ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
}

Deno.test("HEAD answers with the length GET would send, and no body", async () => {
  const app = new Hono();
  app.use(headLength());
  app.get("/json", () =>
    new Response(JSON.stringify({ text: "héllo" }), {
      headers: { "content-type": "application/json; charset=utf-8" },
    }));
  app.get("/missing", () => errorResponse(404, "Not found"));
  let read = false;
  app.get("/stream", () =>
    new Response(
      new ReadableStream({
        pull(controller) {
          read = true;
          controller.close();
        },
      }, { highWaterMark: 0 }),
      { headers: { "content-type": "text/plain" } },
    ));
  await using server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, app.fetch);
  const { port } = server.addr;

  const json = await head(port, "/json");
  assert.match(json, /^HTTP\/1\.1 200 /);
  // {"text":"héllo"}: 16 characters, the é two bytes.
  assert.match(json, /\r\ncontent-length: 17\r\n/i);
  assert.ok(json.endsWith("\r\n\r\n"), `no body: ${JSON.stringify(json)}`);

  const missing = await head(port, "/missing");
  assert.match(missing, /^HTTP\/1\.1 404 /);
  const length = JSON.stringify({ code: 404, message: "Not found" }).length;
  assert.match(missing, new RegExp(`\\r\\ncontent-length: ${length}\\r\\n`, "i"));

  // A streamed file (a media proxy's, under its bare type) is not read to be measured.
  const stream = await head(port, "/stream");
  assert.match(stream, /^HTTP\/1\.1 200 /);
  assert.doesNotMatch(stream, /content-length: [1-9]/i);
  assert.equal(read, false);
});
