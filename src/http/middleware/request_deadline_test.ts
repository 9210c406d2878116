import assert from "node:assert/strict";
import { Hono } from "hono";
import { capturingErrors } from "../../../tests/support/console.ts";
import { AppError } from "../../domain/app_error.ts";
import { errorResponse } from "../envelope.ts";
import { requestDeadline } from "./request_deadline.ts";

/** An app whose `/stuck` route waits for `release`, behind the deadline and a header-setting layer. */
function appWithDeadline(deadlineMs: number, release: Promise<void>) {
  const app = new Hono();
  app.onError((error) =>
    error instanceof AppError
      ? errorResponse(error.status, error.message)
      : errorResponse(500, "Internal server error")
  );
  // As the CORS and rate-limit layers do: headers set on whatever answer comes back.
  app.use(async (c, next) => {
    await next();
    c.res.headers.set("x-outer", "set");
  });
  app.use(requestDeadline(deadlineMs));
  app.get("/stuck", async (c) => {
    await release;
    return c.text("late answer");
  });
  app.get("/quick", (c) => c.text("quick"));
  app.get("/refused", () => {
    throw new AppError(404, "Not found");
  });
  return app;
}

Deno.test("requestDeadline() answers 500 in the envelope once the deadline passes, and logs it", async () => {
  const release = Promise.withResolvers<void>();
  const app = appWithDeadline(50, release.promise);
  let answer: Response | undefined;
  const printed = await capturingErrors(async () => {
    answer = await app.fetch(new Request("http://x/stuck?token=secret"));
  });
  assert.ok(answer);
  assert.equal(answer.status, 500);
  assert.deepEqual(await answer.json(), { code: 500, message: "Internal server error" });
  assert.equal(answer.headers.get("x-outer"), "set", "outer layers still add their headers");
  const line = JSON.parse(printed.find((text) => text.includes("deadline")) ?? "{}");
  assert.equal(line.msg, "request unanswered at its deadline");
  assert.equal(line.path, "/stuck", "logged without its query string");
  assert.equal(line.deadline_ms, 50);
  // The work finishing afterwards changes nothing and throws nothing.
  release.resolve();
  await new Promise((resolve) => setTimeout(resolve, 10));
});

Deno.test("requestDeadline() leaves answers given in time as they are", async () => {
  const app = appWithDeadline(5_000, new Promise(() => {}));
  const quick = await app.fetch(new Request("http://x/quick"));
  assert.equal(await quick.text(), "quick");
  assert.equal(quick.headers.get("x-outer"), "set");
  const refused = await app.fetch(new Request("http://x/refused"));
  assert.equal(refused.status, 404);
  assert.deepEqual(await refused.json(), { code: 404, message: "Not found" });
});

Deno.test("requestDeadline() refuses a deadline that is not positive", () => {
  assert.throws(() => requestDeadline(0), RangeError);
  assert.throws(() => requestDeadline(Number.NaN), RangeError);
});
