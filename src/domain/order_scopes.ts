/**
 * What a channel's request must stay in order with, read from its document before it is stored:
 * its scopes. Requests that share a scope are applied in the order they were stored, also when
 * different instances stored them (see `channels/earlier_deliveries.ts`); others need not wait
 * for each other. A WhatsApp delivery's scopes are its customers (`wa:<wa_id>`,
 * `user:<BSUID>`): a status receipt names none, since statuses only move forward. A Slack
 * request's scope is its thread (`<channel>:<thread ts>`). Null says the request could not be
 * read: it is ordered with every request of its application or workspace.
 */

import { isSlackId } from "./slack_request.ts";

/** The scopes of a WhatsApp webhook delivery (its parsed JSON body). */
export function whatsappOrderScopes(document: unknown): string[] | null {
  const scopes = new Set<string>();
  const entries = field(document, "entry");
  if (!Array.isArray(entries)) return null;
  for (const entry of entries) {
    const changes = field(entry, "changes");
    if (!Array.isArray(changes)) return null;
    for (const change of changes) {
      const value = field(change, "value");
      const messages = field(value, "messages") ?? [];
      const contacts = field(value, "contacts") ?? [];
      if (!Array.isArray(messages) || !Array.isArray(contacts)) return null;
      for (const message of messages) {
        const named = addIds(scopes, field(message, "from"), field(message, "from_user_id"));
        const previous = field(field(message, "system"), "previous_user_id");
        if (!named && !addIds(scopes, undefined, previous)) return null;
      }
      for (const contact of contacts) {
        addIds(scopes, field(contact, "wa_id"), field(contact, "user_id"));
      }
    }
  }
  return [...scopes];
}

/** The scopes of a Slack request: `document` is an event's body or an interaction's payload. */
export function slackOrderScopes(kind: "event" | "action", document: unknown): string[] | null {
  let channel: unknown;
  let thread: unknown;
  if (kind === "event") {
    const event = field(document, "event");
    const message = field(event, "message");
    channel = field(event, "channel");
    thread = field(event, "thread_ts") ?? field(message, "thread_ts") ??
      field(field(event, "previous_message"), "thread_ts") ?? field(event, "ts") ??
      field(message, "ts");
  } else {
    const container = field(document, "container");
    const message = field(document, "message");
    channel = field(container, "channel_id") ?? field(field(document, "channel"), "id");
    thread = field(message, "thread_ts") ?? field(container, "thread_ts") ??
      field(container, "message_ts") ?? field(message, "ts");
  }
  return isSlackId(channel) && isSlackId(thread) ? [`${channel}:${thread}`] : null;
}

/** Adds a customer's ids as scopes; answers whether there was one. */
function addIds(scopes: Set<string>, waId: unknown, userId: unknown): boolean {
  if (typeof waId === "string" && waId !== "") scopes.add(`wa:${waId}`);
  if (typeof userId === "string" && userId !== "") scopes.add(`user:${userId}`);
  return typeof waId === "string" && waId !== "" || typeof userId === "string" && userId !== "";
}

function field(value: unknown, name: string): unknown {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)[name]
    : undefined;
}
