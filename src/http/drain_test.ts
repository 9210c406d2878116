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
