/**
 * The plain data that crosses between the HTTP front and the application actors: write
 * commands, their results, and the messages exchanged with a worker. Nothing here is a class
 * or a function, so that everything survives `postMessage`.
 */

import type { AdReferral } from "../domain/ad_referral.ts";
import type { LogLevel } from "../log.ts";
import type { WebhookEvent } from "../domain/webhook_config.ts";
import type { Flow } from "../domain/flow.ts";

/** A write on behalf of one application. Executed by its actor, in mailbox order. */
export type AppCommand =
  | CreateVisitorCommand
  | SendVisitorMessageCommand
  | SendReplyCommand
  | CloseChatCommand
  | ConfigureWebhookCommand
  | VisitorActionCommand
  | SetFlowCommand
  | WhatsAppInboundCommand
  | SlackEventCommand;

/**
 * Where a command stands in a channel's stream of stored requests, applied in arrival order (see
 * `channels/ordered_apply.ts`). Once a command of `stream` failed retryably, its actor refuses the
 * stream's commands of that `epoch` or an earlier one (answering them retryable, untried): they
 * were handed over before the failure was known and must not be applied ahead of its retry, which
 * comes with a later epoch.
 */
export interface StreamPlace {
  stream: string;
  epoch: number;
}

/** Creates a web visitor (a client with a `web` identity). */
export interface CreateVisitorCommand {
  kind: "visitor.create";
  appId: number;
  /** SHA-256 hex of the visitor token; the token itself never reaches the database. */
  tokenHash: string;
  name: string | null;
  email: string | null;
}

/** A message from a web visitor: opens a conversation when the visitor has none open. */
export interface SendVisitorMessageCommand {
  kind: "visitor.message";
  appId: number;
  clientId: number;
  messageType: string;
  content: string;
  /** The validated document of an attachment (`image`, `file`); absent or null for text. */
  payload?: unknown;
}

/**
 * A message into an existing conversation from the application's side (the Open API's bot,
 * later agents and Flows). A closed conversation is reopened by it.
 */
export interface SendReplyCommand {
  kind: "chat.reply";
  appId: number;
  chatId: number;
  senderType: "agent" | "bot" | "ai" | "flow";
  senderName: string | null;
  messageType: string;
  content: string;
  /** The validated document of a rich message, null for plain text. */
  payload: unknown;
  /**
   * The request's Idempotency-Key (the Open API's) and the SHA-256 hex of what it asks: within a
   * day, the key's request stores one message whatever the retries (see `db/idempotency_keys.ts`).
   */
  idempotency?: { key: string; fingerprint: string };
}

/**
 * A visitor's click on a button of a message (CONTRACT §3): stored as the visitor's message,
 * then it drives the Flow when a Flow sent that message.
 */
export interface VisitorActionCommand {
  kind: "visitor.action";
  appId: number;
  clientId: number;
  chatId: number;
  messageId: number;
  /** The clicked button's id. */
  actionId: string;
  /** Set when a channel's stored request (a Slack click) made the command. */
  order?: StreamPlace;
}

/** One update of a WhatsApp webhook delivery, normalized and ready to store. */
export type WhatsAppInboundEntry =
  | {
    kind: "message";
    /**
     * The customer's WhatsApp id (phone number) and business-scoped user id (BSUID) — at least
     * one is set — and profile name.
     */
    waId: string | null;
    userId: string | null;
    name: string | null;
    /** WhatsApp's message id: a message already stored under it is not stored again. */
    wamid: string;
    /** The platform's timestamp (ISO 8601). */
    timestamp: string;
    messageType: "text" | "image" | "file";
    content: string;
    payload: unknown;
    /** The WhatsApp media id of an `image`/`file`, recorded for the media proxy. */
    mediaId?: string;
    /**
     * The wamid of the message it replies to (Meta's `context.id`): stored as the message it
     * quotes when that is in the conversation it lands in.
     */
    replyToWamid?: string | null;
    /** The ad or post the customer came from (Meta's `referral`), stored with the message. */
    referral?: AdReferral | null;
  }
  | {
    /** A reply button or list row clicked on the message `messageId` of conversation `chatId`. */
    kind: "click";
    waId: string | null;
    userId: string | null;
    name: string | null;
    wamid: string;
    timestamp: string;
    chatId: number;
    messageId: number;
    /** The Parley button id. */
    actionId: string;
    /** What the customer saw on the button: stored as their message. */
    title: string;
  }
  | {
    /**
     * The customer known by `waId` or `userId` changed their number or BSUID: the new ones
     * become identities of the same client.
     */
    kind: "identity";
    /** The notice's message id. */
    wamid: string;
    /** When the customer changed it (the notice's platform timestamp, ISO 8601). */
    timestamp: string;
    waId: string | null;
    userId: string | null;
    newWaId: string | null;
    newUserId: string | null;
  }
  | {
    kind: "status";
    /** A WhatsApp message id of one of Parley's outbound messages. */
    wamid: string;
    status: "sent" | "delivered" | "read" | "failed";
    timestamp: string;
    error: { code: number; title: string } | null;
  };

/**
 * A WhatsApp webhook delivery, stored raw when it arrived: its updates, in order, and then the
 * delivery marked processed, all in one transaction (so a crash never half-applies one).
 */
export interface WhatsAppInboundCommand {
  kind: "whatsapp.inbound";
  appId: number;
  deliveryId: number;
  entries: WhatsAppInboundEntry[];
  /**
   * Set on the first part of a delivery split where an update must see a Flow step caused by an
   * earlier one (see `db/write_batch.ts`): the delivery is marked processed by the later part.
   */
  partial?: boolean;
  order?: StreamPlace;
}

/** A file attached to a member's reply in Slack. */
export interface SlackReplyFile {
  id: string;
  /** The file's link through Parley's Slack media proxy. */
  url: string;
  filename: string;
  mimeType: string | null;
  image: boolean;
}

/** What a Slack event does to a conversation mirrored in the workspace. */
export type SlackChange =
  | {
    /** A workspace member's reply in a conversation's thread: an agent message. */
    kind: "reply";
    chatId: number;
    /** The member's Slack display name. */
    senderName: string;
    text: string;
    /** A `note:` reply: stored, shown in Slack and the Open API, never sent to the visitor. */
    internal: boolean;
    /** Files attached in Slack, as links to Parley's Slack media proxy. */
    files: SlackReplyFile[];
    channelId: string;
    ts: string;
  }
  | {
    kind: "edit";
    channelId: string;
    ts: string;
    text: string;
    /** The new text is a `note:`: a reply the visitor saw becomes internal (hidden from them). */
    internal: boolean;
    /**
     * Set when the edited message is a reply in a conversation's thread: its conversation,
     * sender and files. A reply posted with files only gets a text message when an edit gives it
     * text. `mayStore`: a member's recent reply, which Parley lacking it (its first delivery
     * failed, Slack's retry is still to come) is stored as the edit makes it read.
     */
    reply?: { chatId: number; senderName: string; files: SlackReplyFile[]; mayStore: boolean };
  }
  | { kind: "delete"; channelId: string; ts: string };

/**
 * A Slack event, stored raw when it arrived and applied once: its `event_id` is recorded in the
 * same transaction as its change (none, when it changes nothing), and the delivery marked applied.
 */
export interface SlackEventCommand {
  kind: "slack.event";
  appId: number;
  teamId: string;
  eventId: string;
  deliveryId: number;
  change: SlackChange | null;
  order?: StreamPlace;
}

/** Replaces the application's Flow (already validated); null removes it. */
export interface SetFlowCommand {
  kind: "flow.set";
  appId: number;
  flow: Flow | null;
}

/** Closes a conversation (idempotent: closing a closed one changes nothing). */
export interface CloseChatCommand {
  kind: "chat.close";
  appId: number;
  chatId: number;
  /** Set when a channel's stored request (Slack's Close button) made the command. */
  order?: StreamPlace;
}

/**
 * Replaces the application's webhook configuration. Serialized with the application's other
 * writes, so a message's outbox rows follow the configuration in force when it commits.
 */
export interface ConfigureWebhookCommand {
  kind: "webhook.configure";
  appId: number;
  url: string;
  /** Known event names, deduplicated, in catalogue order. */
  events: WebhookEvent[];
  enabled: boolean;
  /** The secret to store if the application has none yet, already sealed. */
  newSecretSealed: string;
}

/** What a command answers: a value, or an error in the contract's terms. */
export type CommandResult =
  | {
    ok: true;
    value: unknown;
    /** The answer an earlier request with the same Idempotency-Key got: nothing was stored. */
    replayed?: true;
  }
  | {
    ok: false;
    status: number;
    message: string;
    /**
     * The failure may pass (the database was not reached, the driver lost the transaction): a
     * channel's stored request is tried again soon. Clients see the same answer either way.
     */
    retryable?: boolean;
  };

/** The key of the actor that executes commands of application `appId`. */
export function appActorKey(appId: number): string {
  return `app:${appId}`;
}

/** A command for actor `key`, numbered by the main thread to match its reply. */
export interface Ask {
  id: number;
  key: string;
  command: AppCommand;
}

/** The result of ask `id`. */
export interface Reply {
  id: number;
  result: CommandResult;
}

/**
 * Main thread → worker. Asks and replies travel in arrays, one message per tick and direction:
 * a message costs both threads far more than the commands it carries.
 */
export type ToWorker =
  | { type: "init"; databaseUrl: string; workerIndex: number; logLevel: LogLevel | "silent" }
  | { type: "ask"; asks: Ask[] }
  | { type: "stop" };

/** Worker → main thread. */
export type FromWorker =
  | { type: "ready" }
  | { type: "reply"; replies: Reply[] }
  /** A transaction never settled (the driver lost it): the worker is to be replaced. */
  | { type: "stuck"; message: string }
  | { type: "stopped" };
