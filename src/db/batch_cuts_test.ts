import assert from "node:assert/strict";
import type { AppCommand, WhatsAppInboundEntry } from "../actors/protocol.ts";
import { commitSegments, segmentsAt } from "./batch_cuts.ts";
import { UNAVAILABLE } from "../actors/commit_loop.ts";

const entry = (wamid: string): WhatsAppInboundEntry => ({
  kind: "message",
  waId: "1",
  userId: null,
  name: null,
  wamid,
  timestamp: "2026-11-24T10:00:00Z",
  messageType: "text",
  content: wamid,
  payload: null,
});

Deno.test("segmentsAt cuts between commands and inside deliveries, whose parts but the last are partial", () => {
  const close: AppCommand = { kind: "chat.close", appId: 1, chatId: 9 };
  const delivery: AppCommand = {
    kind: "whatsapp.inbound",
    appId: 1,
    deliveryId: 7,
    entries: ["a", "b", "c", "d"].map(entry),
  };
  const segments = segmentsAt([close, delivery, close], [
    { command: 1, entry: 1 },
    { command: 1, entry: 3 },
    { command: 2, entry: 0 },
  ]);
  const shape = segments.map((segment) =>
    segment.map(({ command, origin }) =>
      command.kind === "whatsapp.inbound"
        ? `${origin}:${command.entries.map((e) => e.wamid).join("")}${command.partial ? "~" : ""}`
        : `${origin}`
    )
  );
  assert.deepEqual(shape, [["0", "1:a~"], ["1:bc~"], ["1:d"], ["2"]]);
});

Deno.test("commitSegments answers once per command, a cut delivery with its parts summed", async () => {
  const delivery: AppCommand = {
    kind: "whatsapp.inbound",
    appId: 1,
    deliveryId: 7,
    entries: ["a", "b"].map(entry),
  };
  const segments = segmentsAt([delivery, delivery], [{ command: 0, entry: 1 }]);
  const applied = (n: number) => ({ ok: true as const, value: { applied: n } });
  const commit = (commands: AppCommand[]) =>
    Promise.resolve(
      commands.map((command) =>
        applied(command.kind === "whatsapp.inbound" ? command.entries.length : 0)
      ),
    );
  assert.deepEqual(await commitSegments(2, segments, commit, commit), [applied(2), applied(2)]);
});

Deno.test("commitSegments commits no later part of a delivery whose earlier part failed", async () => {
  const delivery: AppCommand = {
    kind: "whatsapp.inbound",
    appId: 1,
    deliveryId: 7,
    entries: ["a", "b", "c"].map(entry),
  };
  const close: AppCommand = { kind: "chat.close", appId: 2, chatId: 3 };
  const segments = segmentsAt([delivery, close], [
    { command: 0, entry: 1 },
    { command: 0, entry: 2 },
  ]);
  const failed = { ok: false as const, status: 500, message: "Internal server error" };
  const committed: string[] = [];
  const later = (commands: AppCommand[]) => {
    committed.push(
      ...commands.map((command) =>
        command.kind === "whatsapp.inbound" ? command.entries.map((e) => e.wamid).join("") : "close"
      ),
    );
    // The middle part fails; the close beside the last part goes on.
    return Promise.resolve(
      commands.map((command) =>
        command.kind === "whatsapp.inbound" && command.entries[0].wamid === "b"
          ? failed
          : { ok: true as const, value: null }
      ),
    );
  };
  const first = () => Promise.resolve([{ ok: true as const, value: { applied: 1 } }]);
  const results = await commitSegments(2, segments, first, later);
  assert.deepEqual(committed, ["b", "close"], "the part after the failed one is left to recovery");
  assert.deepEqual(results, [failed, { ok: true, value: null }]);
});

Deno.test("commitSegments tries no later command of an application once one failed retryably", async () => {
  const delivery = (deliveryId: number, appId = 1): AppCommand => ({
    kind: "whatsapp.inbound",
    appId,
    deliveryId,
    entries: [entry(`w${deliveryId}`)],
  });
  // Three segments: d1 | d2 | d3 and another application's d4.
  const segments = segmentsAt([delivery(1), delivery(2), delivery(3), delivery(4, 2)], [
    { command: 1, entry: 0 },
    { command: 2, entry: 0 },
  ]);
  const committed: number[] = [];
  const ok = { ok: true as const, value: { applied: 1 } };
  const commit = (commands: AppCommand[]) =>
    Promise.resolve(commands.map((command) => {
      const id = command.kind === "whatsapp.inbound" ? command.deliveryId : 0;
      if (id === 2) return UNAVAILABLE; // its connection was lost, alone too
      committed.push(id);
      return ok;
    }));
  const results = await commitSegments(4, segments, commit, commit);
  assert.deepEqual(results, [ok, UNAVAILABLE, UNAVAILABLE, ok]);
  assert.deepEqual(committed, [1, 4], "d3 would have been stored before d2's retry");
});
