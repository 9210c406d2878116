import assert from "node:assert/strict";
import type { AppCommand, WhatsAppInboundEntry } from "../actors/protocol.ts";
import { joinSegmentResults, segmentsAt } from "./batch_cuts.ts";

const entry = (wamid: string): WhatsAppInboundEntry => ({
  kind: "message",
  waId: "1",
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

Deno.test("joinSegmentResults answers once per command, a cut delivery with its parts summed", () => {
  const delivery: AppCommand = {
    kind: "whatsapp.inbound",
    appId: 1,
    deliveryId: 7,
    entries: ["a", "b"].map(entry),
  };
  const segments = segmentsAt([delivery, delivery], [{ command: 0, entry: 1 }]);
  const applied = (n: number) => ({ ok: true as const, value: { applied: n } });
  assert.deepEqual(
    joinSegmentResults(2, segments, [[applied(1)], [applied(1), applied(2)]]),
    [applied(2), applied(2)],
  );
  const failed = { ok: false as const, status: 500, message: "Internal server error" };
  assert.deepEqual(
    joinSegmentResults(2, segments, [[applied(1)], [failed, applied(2)]]),
    [failed, applied(2)],
  );
});
