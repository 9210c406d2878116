import assert from "node:assert/strict";
import type { Conversation, Message } from "../domain/conversation.ts";
import { framesOf } from "./visitor_frames.ts";

const OPENED_AT = "2026-11-25T10:00:00.000001Z";
const LATER = "2026-11-25T10:00:00.004000Z";

function chat(status: Conversation["status"], createdAt = OPENED_AT): Conversation {
  return {
    id: 9,
    client_id: 3,
    status,
    channel: "web",
    last_message_at: LATER,
    created_at: createdAt,
  };
}

function message(id: number, createdAt: string, sender: Message["sender_type"]): Message {
  return {
    id,
    chat_id: 9,
    sender_type: sender,
    message_type: "text",
    content: `m${id}`,
    created_at: createdAt,
  };
}

/** The frames' types, each with the status of a chat.updated. */
function summary(frames: ReturnType<typeof framesOf>): string[] {
  return frames.map(({ frame }) =>
    frame.type === "chat.updated" ? `chat.updated ${frame.chat.status}` : frame.type
  );
}

Deno.test("framesOf() puts an open conversation's state before its messages and a closed one's after them", () => {
  const messages = [message(1, LATER, "agent")].map((m) => ({ appId: 1, clientId: 3, message: m }));
  assert.deepEqual(
    summary(framesOf({ conversations: [{ appId: 1, chat: chat("open") }], messages, edited: [] })),
    ["chat.updated open", "message.created"],
  );
  const closing = framesOf({
    conversations: [{ appId: 1, chat: chat("closed") }],
    messages,
    edited: [],
  });
  assert.deepEqual(summary(closing), ["message.created", "chat.updated closed"]);
  assert.ok(closing.every((entry) => entry.openedBy === undefined), "it was open before");
});

Deno.test("framesOf() gives a conversation opened and closed within the changes its opening too, naming the message that opened it", () => {
  const messages = [message(1, OPENED_AT, "visitor"), message(2, LATER, "flow")]
    .map((m) => ({ appId: 1, clientId: 3, message: m }));
  const frames = framesOf({
    conversations: [{ appId: 1, chat: chat("closed") }],
    messages,
    edited: [],
  });
  assert.deepEqual(summary(frames), [
    "chat.updated open",
    "message.created",
    "message.created",
    "chat.updated closed",
  ]);
  const [opening] = frames;
  assert.equal(opening.openedBy, 1);
  assert.equal(opening.clientId, 3);
  assert.deepEqual(opening.frame.type === "chat.updated" && opening.frame.chat, {
    ...chat("open"),
    last_message_at: OPENED_AT,
  });
});
