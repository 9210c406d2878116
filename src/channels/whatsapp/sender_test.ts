import assert from "node:assert/strict";
import { judgeGraphFailure, sendToWhatsApp } from "./sender.ts";
import type { ClaimedSend, SendOutcome } from "../../db/channel_sends.ts";

const failure = (status: number, code: number | null) => ({
  status,
  code,
  subcode: null,
  message: "x",
  retryAfterMs: null,
});

Deno.test("judgeGraphFailure retries rate limits, server errors and lost answers", () => {
  const cases: [number, number | null][] = [[429, 130429], [400, 131056], [500, 1], [503, null], [
    0,
    null,
  ]];
  for (const [status, code] of cases) {
    assert.equal(judgeGraphFailure(failure(status, code)), "retry", `${status}/${code}`);
  }
});

Deno.test("judgeGraphFailure fails the message and flags the channel when Meta refuses its token", () => {
  assert.equal(judgeGraphFailure(failure(401, 190)), "attention");
  assert.equal(judgeGraphFailure(failure(400, 190)), "attention");
  assert.equal(judgeGraphFailure(failure(401, null)), "attention");
});

Deno.test("judgeGraphFailure fails other refusals at once, the closed window included", () => {
  for (const code of [100, 131026, 131047, 132000]) {
    assert.equal(judgeGraphFailure(failure(400, code)), "fail", String(code));
  }
});

/** A claimed one-part text send to a customer whose window is `windowOpen`. */
function claimedText(sentParts: number, windowOpen: boolean): ClaimedSend {
  return {
    appId: 1,
    id: 2,
    attempts: 1,
    claimedAt: "2026-11-25T00:00:00.000000Z",
    turn: 1,
    message: {
      id: 3,
      chatId: 4,
      messageType: "text",
      content: "Your order shipped",
      payload: null,
      withdrawn: false,
    },
    recipient: { kind: "phone", id: "15551234567" },
    channel: { phoneNumberId: "1", accessTokenSealed: "sealed" },
    sentParts,
    windowOpen,
  };
}

Deno.test("sendToWhatsApp fails a free-form message whose window closed, unless all of it left already", async () => {
  for (const [sentParts, expected] of [[0, "failed"], [1, "sent"]] as const) {
    const outcomes: SendOutcome[] = [];
    await sendToWhatsApp({
      // Nothing listens there: a call would be recorded as a retry.
      graphUrl: "http://127.0.0.1:9",
      openSecret: () => "token",
      recordPart: () => Promise.resolve(),
      recordOutcome: (_send, outcome) => (outcomes.push(outcome), Promise.resolve()),
      markAttention: () => Promise.resolve(),
    }, claimedText(sentParts, false));
    assert.equal(outcomes.length, 1);
    assert.equal(outcomes[0].state, expected, `${sentParts} part(s) sent before`);
    if (outcomes[0].state === "failed") assert.equal(outcomes[0].code, 131047);
  }
});
