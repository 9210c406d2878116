import assert from "node:assert/strict";
import { recoverInPages, RECOVERY_PAGE_SIZE } from "./recover_stored.ts";
import type { StoredRequestKey } from "../db/stored_requests.ts";

Deno.test("recoverInPages reads page after page by key until one comes back short", async () => {
  const stored = Array.from({ length: RECOVERY_PAGE_SIZE * 2 + 5 }, (_, id) => ({
    id,
    receivedAt: `t${String(id).padStart(4, "0")}`,
  }));
  const asked: (StoredRequestKey | undefined)[] = [];
  const applied: number[] = [];
  const found = await recoverInPages(
    (after) => {
      asked.push(after);
      const from = after === undefined ? 0 : after.id + 1;
      return Promise.resolve(stored.slice(from, from + RECOVERY_PAGE_SIZE));
    },
    (request) => {
      applied.push(request.id);
      return Promise.resolve();
    },
  );
  assert.equal(found, stored.length);
  assert.deepEqual(applied, stored.map((request) => request.id));
  assert.deepEqual(asked.map((key) => key?.id), [
    undefined,
    RECOVERY_PAGE_SIZE - 1,
    RECOVERY_PAGE_SIZE * 2 - 1,
  ]);
});
