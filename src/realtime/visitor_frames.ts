/**
 * The frames a visitor's socket receives (CONTRACT §3), built from what a change notice or a replay
 * read, and the record of what a socket was sent, so that a catch-up and the notices around it
 * send each frame once.
 */
import type { ClientChanges } from "../db/realtime.ts";
import type { Conversation, Message } from "../domain/conversation.ts";

/** A frame sent to visitor sockets (CONTRACT §3). */
export type VisitorFrame =
  | { type: "message.created" | "message.updated"; chat_id: number; message: Message }
  | { type: "message.deleted"; chat_id: number; message: { id: number; chat_id: number } }
  /**
   * The conversation rides under `message`, where the contract's frame shape carries its object,
   * and under `chat`, which names it for what it is.
   */
  | { type: "chat.updated"; chat_id: number; message: Conversation; chat: Conversation };

/**
 * What was sent to a socket: its messages by id, and the last frame about each conversation's
 * state and each message's edits (by {@linkcode frameKey}).
 */
export interface SentFrames {
  ids: Set<number>;
  last: Map<string, string>;
}

/** What a frame other than a new message is about: a conversation's state, or a message. */
export function frameKey(frame: VisitorFrame): string {
  return frame.type === "chat.updated" ? `chat ${frame.chat_id}` : `message ${frame.message.id}`;
}

/** Records `frame` as sent. */
export function remember(sent: SentFrames, frame: VisitorFrame, data: string): void {
  if (frame.type === "message.created") sent.ids.add(frame.message.id);
  else sent.last.set(frameKey(frame), data);
}

/**
 * Whether `frame` would tell the socket nothing new: a message it has, or the very frame it got
 * last about the same conversation or message (an edit back to an earlier text still goes out).
 */
export function isRepeat(sent: SentFrames, frame: VisitorFrame, data: string): boolean {
  return frame.type === "message.created"
    ? sent.ids.has(frame.message.id)
    : sent.last.get(frameKey(frame)) === data;
}

/**
 * The frames of `changes`, each with the visitor it is for: an open conversation's state before
 * the new messages (a new or reopened conversation comes before the messages in it), a closed
 * one's after them (a farewell or the click that closed it comes before the close), then edits.
 * A conversation opened and already closed by the time its changes were read (a Flow that says
 * goodbye at once) gets both: its state as it opened, before its messages, and its close after;
 * that opening frame names the message that opened the conversation (`openedBy`), to be left out
 * where that message was sent before.
 */
export function framesOf(
  changes: ClientChanges,
): { appId: number; clientId: number; frame: VisitorFrame; openedBy?: number }[] {
  const state = ({ appId, chat }: ClientChanges["conversations"][number]) => ({
    appId,
    clientId: chat.client_id,
    frame: { type: "chat.updated", chat_id: chat.id, message: chat, chat } as VisitorFrame,
  });
  // A conversation is stored with the message that opens it, in one statement stamping both
  // with the same time: that message among the changes means the conversation opened in them.
  // Looked up by conversation and time: a replay may hold thousands of each.
  const byStamp = new Map<string, ClientChanges["messages"][number]>();
  for (const entry of changes.messages) {
    const key = `${entry.appId} ${entry.message.chat_id} ${entry.message.created_at}`;
    if (!byStamp.has(key)) byStamp.set(key, entry);
  }
  const opened = changes.conversations.flatMap(({ appId, chat }) => {
    if (chat.status === "open") return [];
    const first = byStamp.get(`${appId} ${chat.id} ${chat.created_at}`);
    if (first === undefined) return [];
    const asOpened = { ...chat, status: "open" as const, last_message_at: chat.created_at };
    return [{ ...state({ appId, chat: asOpened }), openedBy: first.message.id }];
  });
  return [
    ...changes.conversations.filter(({ chat }) => chat.status === "open").map(state),
    ...opened,
    ...changes.messages.map(({ appId, clientId, message }) => ({
      appId,
      clientId,
      frame: { type: "message.created", chat_id: message.chat_id, message } as VisitorFrame,
    })),
    ...changes.conversations.filter(({ chat }) => chat.status !== "open").map(state),
    ...changes.edited.map(({ appId, clientId, message, deleted }) => ({
      appId,
      clientId,
      frame: (deleted
        ? {
          type: "message.deleted",
          chat_id: message.chat_id,
          message: { id: message.id, chat_id: message.chat_id },
        }
        : { type: "message.updated", chat_id: message.chat_id, message }) as VisitorFrame,
    })),
  ];
}
