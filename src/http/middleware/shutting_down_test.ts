import assert from "node:assert/strict";
import { Hono } from "hono";
import { refuseWhileShuttingDown } from "./shutting_down.ts";

Deno.test("refuseWhileShuttingDown() refuses only the requests marked as arriving once the stop began", async () => {
  const refused = new WeakSet<Request>();
  const app = new Hono();
  app.use(refuseWhileShuttingDown((request) => refused.has(request), ["/api/v1/widget"]));
  app.all("*", (c) => c.text("handled"));

  // Accepted before the stop: handled in full even if the stop begins meanwhile.
  const early = new Request("http://x/healthz");
  assert.equal(await (await app.fetch(early)).text(), "handled");

  const late = new Request("http://x/healthz");
  refused.add(late);
  const answer = await app.fetch(late);
  assert.equal(answer.status, 503);
  assert.equal(answer.headers.get("connection"), "close");
  assert.deepEqual(await answer.json(), { code: 503, message: "Shutting down" });

  // Under a mount that refuses by itself (after its own headers), passed on.
  const widget = new Request("http://x/api/v1/widget/messages");
  refused.add(widget);
  assert.equal(await (await app.fetch(widget)).text(), "handled");
  const lookalike = new Request("http://x/api/v1/widgets");
  refused.add(lookalike);
  assert.equal((await app.fetch(lookalike)).status, 503);
});
