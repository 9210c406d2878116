import assert from "node:assert/strict";
import { createThrottledLog } from "./log.ts";
import { capturingErrors } from "../tests/support/console.ts";

Deno.test("createThrottledLog() writes once per interval, counting the lines it left out", async () => {
  const failed = createThrottledLog("error", "renewal failed", 40);
  const printed = await capturingErrors(async () => {
    failed({ n: 1 });
    failed({ n: 2 });
    failed({ n: 3 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    failed({ n: 4 });
    failed({ n: 5 });
  });
  const lines = printed.map((line) => JSON.parse(line));
  assert.deepEqual(
    lines.map(({ msg, n, repeats_not_logged }) => ({ msg, n, repeats_not_logged })),
    [
      { msg: "renewal failed", n: 1, repeats_not_logged: undefined },
      { msg: "renewal failed", n: 4, repeats_not_logged: 2 },
    ],
  );
});
