import assert from "node:assert/strict";
import { sendWhatsAppMessage } from "./graph_client.ts";

Deno.test("sendWhatsAppMessage() reads Retry-After in seconds and as an HTTP date", async () => {
  const answers = [
    new Headers({ "retry-after": "7" }),
    new Headers({ "retry-after": new Date(Date.now() + 120_000).toUTCString() }),
    new Headers({ "retry-after": "soon" }),
  ];
  await using graph = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen: () => {} },
    () =>
      Response.json(
        { error: { code: 130429, message: "Rate limit hit" } },
        { status: 429, headers: answers.shift() },
      ),
  );
  const access = { graphUrl: `http://127.0.0.1:${graph.addr.port}`, accessToken: "token" };
  const retryAfter = async () => {
    const result = await sendWhatsAppMessage(access, "1", { kind: "phone", id: "15550001111" }, {
      type: "text",
      text: { body: "hi" },
    });
    assert.equal(result.ok, false);
    return result.ok ? undefined : result.failure.retryAfterMs;
  };
  assert.equal(await retryAfter(), 7_000);
  const fromDate = await retryAfter();
  assert.ok(
    fromDate !== null && fromDate !== undefined && fromDate > 110_000 && fromDate <= 120_000,
    String(fromDate),
  );
  assert.equal(await retryAfter(), null);
});
