/**
 * The line a Slack post of a reply opens with (CONTRACT §6.2): when a WhatsApp customer swipes to
 * reply, agents in the thread see which message their "yes" answers — who wrote it and the start
 * of its text, plain and one line — or that it was deleted since. The line is bounded
 * ({@linkcode MAX_REPLY_CONTEXT}) so that the renderer can keep room for it in a post whatever
 * the quoted message says. Pure: no I/O.
 */
import type { MessageType } from "./message_kinds.ts";
import { plainTextOf } from "./plain_text.ts";
import { escapeMrkdwn, truncatePlain } from "./slack_mrkdwn.ts";

/** Longest reply line (escaped mrkdwn): each `&` of the cut texts may grow five times. */
export const MAX_REPLY_CONTEXT = 1_000;
/** How much of the quoted message's plain text is shown, and of its sender's name. */
const MAX_QUOTE = 100;
const MAX_SENDER = 60;

/** The message a reply quotes: its sender's label and what it said. */
export interface QuotedSource {
  sender: string;
  message_type: MessageType;
  content: string;
  payload: unknown;
}

/**
 * What a quoted message says as one plain line: its plain-text fallback with every run of
 * whitespace one space; an image or file by its caption (else its file name), not its link.
 */
function quotedText(quoted: QuotedSource): string {
  let text = plainTextOf(quoted.message_type, quoted.payload, quoted.content);
  if (quoted.message_type === "image" || quoted.message_type === "file") {
    const lines = text.split("\n");
    text = lines.length > 1 ? lines.slice(0, -1).join(" ") : `[${quoted.message_type}]`;
  }
  return text.replace(/\s+/g, " ").trim();
}

/**
 * `↩ Replying to <sender>: “<the first 100 characters of the quoted text>”` as escaped mrkdwn
 * (cut between graphemes, ending in "…" when cut), or `↩ Replying to a deleted message` for
 * `null`. At most {@linkcode MAX_REPLY_CONTEXT} characters.
 */
export function renderReplyContext(quoted: QuotedSource | null): string {
  if (quoted === null) return "↩ Replying to a deleted message";
  const sender = escapeMrkdwn(truncatePlain(quoted.sender.replace(/\s+/g, " ").trim(), MAX_SENDER));
  const text = escapeMrkdwn(truncatePlain(quotedText(quoted), MAX_QUOTE));
  return `↩ Replying to ${sender}: “${text}”`;
}
