import assert from "node:assert/strict";
import { drainable } from "./drain.ts";

const INFO = {} as Deno.ServeHandlerInfo<Deno.NetAddr>;

Deno.test("drainable() waits for the handlers running, refuses new requests, and gives up after its timeout", async () => {
  const answer = Promise.withResolvers<Response>();
  const requests = drainable(() => answer.promise);
  const running = requests.handler(new Request("http://x/"), INFO);
  let drained: boolean | null = null;
  const draining = requests.drain(1_000).then((result) => drained = result);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(drained, null, "still waiting for the handler");
  const refused = await requests.handler(new Request("http://x/"), INFO);
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get("connection"), "close");
  assert.deepEqual(await refused.json(), { code: 503, message: "Shutting down" });
  answer.resolve(new Response("done"));
  assert.equal(await (await running).text(), "done");
  await draining;
  assert.equal(drained, true);

  const stuck = drainable(() => new Promise<Response>(() => {}));
  void stuck.handler(new Request("http://x/"), INFO);
  assert.equal(await stuck.drain(30), false);
  assert.equal(await drainable(() => new Response()).drain(30), true, "idle at once");
});

Deno.test("drainable() hands the requests arriving while it drains to its refusal, uncounted", async () => {
  const answer = Promise.withResolvers<Response>();
  const refusal = Promise.withResolvers<Response>();
  const requests = drainable(() => answer.promise, () => refusal.promise);
  const running = requests.handler(new Request("http://x/"), INFO);
  const draining = requests.drain(1_000);
  const refused = requests.handler(new Request("http://x/late"), INFO);
  answer.resolve(new Response("done"));
  assert.equal(await (await running).text(), "done");
  assert.equal(await draining, true, "drained though the refusal is still being answered");
  refusal.resolve(new Response("refused", { status: 503 }));
  assert.equal((await refused).status, 503);
});
