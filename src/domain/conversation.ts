/** The shapes of conversations and messages as every client sees them (CONTRACT §2.4, §3). */
import type { AdReferral } from "./ad_referral.ts";

/** Conversation status values. */
export const CONVERSATION_STATUSES = ["open", "closed"] as const;
/** A conversation status. */
export type ConversationStatus = typeof CONVERSATION_STATUSES[number];

/** Channels a conversation can be on. */
export type Channel = "web" | "whatsapp";

/** A conversation (CONTRACT §2.4). Timestamps are ISO 8601 with microseconds and `Z`. */
export interface Conversation {
  id: number;
  client_id: number;
  status: ConversationStatus;
  channel: Channel;
  last_message_at: string;
  created_at: string;
}

/** Who wrote a message. */
export type SenderType = "visitor" | "agent" | "bot" | "ai" | "flow" | "system";

/** A stored message as clients see it (CONTRACT §3). Optional fields are omitted when empty. */
export interface Message {
  id: number;
  chat_id: number;
  sender_type: SenderType;
  sender_name?: string;
  message_type: string;
  content: string;
  payload?: unknown;
  internal?: true;
  status?: "pending" | "sent" | "delivered" | "read" | "failed";
  /** Why a `failed` message failed, as the platform said (its error code and title). */
  error?: { code: number; title: string | null };
  /** The ad or post a WhatsApp customer came from (Meta's `referral`, on their first message). */
  referral?: AdReferral;
  /** Only in the `message.updated` webhook announcing its deletion: the message is gone. */
  deleted?: true;
  created_at: string;
}

/** Longest message content accepted, in characters. */
export const MAX_CONTENT_LENGTH = 10_000;

/**
 * Hours after a WhatsApp customer's last inbound message during which free-form messages may
 * be sent to them (SPEC §3); outside it only templates are accepted.
 */
export const REPLY_WINDOW_HOURS = 24;

/** Why a reply kept outside WhatsApp's window failed (its `failure_title`, and the 422's message). */
export const OUTSIDE_WINDOW = "Outside the 24-hour window: only template messages can be sent";

/**
 * The `failure_code` of such a reply: Meta's own for a free-form message outside the window
 * (131047, "Re-engagement message"), which it would have answered.
 */
export const OUTSIDE_WINDOW_CODE = 131047;
