/**
 * The kinds of message Parley carries (CONTRACT §2.1, §4) and the rules for their content: which
 * `message_type` values exist, the JSON document each rich kind holds in `content`, how that
 * document is validated into the stored `payload`, and how any kind degrades to plain text for a
 * channel that cannot render it natively ("degrade to plain text, never drop"). Pure: no I/O.
 */

import { z } from "zod";
import { AppError } from "./app_error.ts";
import { MAX_CONTENT_LENGTH } from "./conversation.ts";
import { MAX_JSON_DEPTH, parseJsonDocument } from "./json_document.ts";

import {
  type Button,
  BUTTONS_CONTENT,
  CARD_CONTENT,
  CAROUSEL_CONTENT,
  FORM_CONTENT,
  MEDIA_CONTENT,
  NOT_BLANK,
  TEMPLATE_CONTENT,
  urlWithControlCharacter,
} from "./rich_content.ts";
/** Every message type, in contract order. */
export const MESSAGE_TYPES = [
  "text",
  "markdown",
  "card",
  "buttons",
  "carousel",
  "form",
  "image",
  "file",
  "template",
] as const;

/** A message type (CONTRACT §2.1). */
export type MessageType = typeof MESSAGE_TYPES[number];

/** A message type whose `content` is a JSON document (every type but `text` and `markdown`). */
export type RichMessageType = Exclude<MessageType, "text" | "markdown">;

/** The schema of the JSON document in `content`, per rich message type. */
export const RICH_CONTENT_SCHEMAS = {
  card: CARD_CONTENT,
  buttons: BUTTONS_CONTENT,
  carousel: CAROUSEL_CONTENT,
  form: FORM_CONTENT,
  image: MEDIA_CONTENT,
  file: MEDIA_CONTENT,
  template: TEMPLATE_CONTENT,
} as const satisfies Record<RichMessageType, z.ZodType>;

/** Whether `value` is one of {@linkcode MESSAGE_TYPES}. */
export function isMessageType(value: string): value is MessageType {
  return (MESSAGE_TYPES as readonly string[]).includes(value);
}

/** Whether `type` carries plain text rather than a JSON document. */
function isPlainType(type: MessageType): type is "text" | "markdown" {
  return type === "text" || type === "markdown";
}

/**
 * Readable messages for the issues whose schemas carry no message of their own (`is required`,
 * `must be a string`, `must be one of: …`); pass as `safeParse(value, { error: describeIssue })`.
 */
export function describeIssue(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.input === undefined) return "is required";
  if (issue.code === "invalid_type") {
    const expected = String(issue.expected);
    return `must be ${/^[aeiou]/.test(expected) ? "an" : "a"} ${expected}`;
  }
  if (issue.code === "invalid_value") {
    return `must be one of: ${issue.values.map(String).join(", ")}`;
  }
  return undefined;
}

/** The 400 for rich content that does not fit its type. */
function invalidContent(type: MessageType, detail: string, cause?: unknown): AppError {
  return new AppError(400, `content is not valid for message_type ${type}: ${detail}`, { cause });
}

/**
 * Validates a message's `message_type` and `content` (CONTRACT §2.1, §4), in this order: the
 * type is known, `content` is at most 10000 characters (for every type), and for rich types
 * `content` is a JSON object that fits the type's schema. Unknown keys are stripped.
 *
 * @returns the type and the stored payload: `null` for `text` and `markdown`, otherwise the
 * parsed, validated document.
 * @throws {AppError} 400 `message_type must be one of: …` for an unknown type, 400 `content is too
 * long (max 10000 characters)`, or 400 `content is not valid for message_type <t>: <detail>`,
 * where `<detail>` names the first failing path (e.g. `buttons.0.title is required`).
 */
export function parseMessageContent(
  messageType: string,
  content: string,
): { messageType: MessageType; payload: unknown | null } {
  if (!isMessageType(messageType)) {
    throw new AppError(400, `message_type must be one of: ${MESSAGE_TYPES.join(", ")}`);
  }
  if (characterCount(content) > MAX_CONTENT_LENGTH) {
    throw new AppError(400, `content is too long (max ${MAX_CONTENT_LENGTH} characters)`);
  }
  if (content.includes("\0")) throw new AppError(400, NUL_IN_CONTENT);
  if (isPlainType(messageType)) return { messageType, payload: null };

  const parsed = parseJsonDocument(content);
  if (!parsed.ok) {
    throw parsed.reason === "depth"
      ? invalidContent(messageType, `nested more than ${MAX_JSON_DEPTH} levels deep`)
      : invalidContent(messageType, "not a JSON document", parsed.cause);
  }
  const document = parsed.value;
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw invalidContent(messageType, "not a JSON object");
  }
  const result = RICH_CONTENT_SCHEMAS[messageType].safeParse(document, { error: describeIssue });
  if (!result.success) {
    const issue = result.error.issues[0];
    const path = issue.path.map(String).join(".");
    throw invalidContent(messageType, path === "" ? issue.message : `${path} ${issue.message}`);
  }
  const badUrl = messageType === "template" ? null : urlWithControlCharacter(result.data);
  if (badUrl !== null) throw invalidContent(messageType, `${badUrl} must be an https URL`);
  // An escaped NUL parses into one, which PostgreSQL cannot store in jsonb either.
  if (JSON.stringify(result.data).includes("\\u0000")) throw new AppError(400, NUL_IN_CONTENT);
  return { messageType, payload: result.data };
}

/**
 * How many characters (Unicode code points) `text` holds: a character outside the Basic
 * Multilingual Plane (most emoji) is one, though JavaScript counts its two UTF-16 halves.
 */
export function characterCount(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
}

/**
 * The answer to content holding a NUL character: PostgreSQL text cannot store one, and the
 * request must fail as bad input, not as a failed write.
 */
export const NUL_IN_CONTENT = "content must not contain NUL characters";

/**
 * The buttons a message offers a click on, in order: a `buttons` message's, a card's, every
 * card's of a carousel (their ids are unique message-wide), and a WhatsApp template's quick
 * replies. Empty for every other kind and for a payload that does not fit its type.
 */
export function buttonsOffered(messageType: string, payload: unknown): Button[] {
  switch (messageType) {
    case "buttons": {
      const result = BUTTONS_CONTENT.safeParse(payload);
      return result.success ? result.data.buttons : [];
    }
    case "card": {
      const result = CARD_CONTENT.safeParse(payload);
      return result.success ? result.data.buttons ?? [] : [];
    }
    case "carousel": {
      const result = CAROUSEL_CONTENT.safeParse(payload);
      return result.success ? result.data.cards.flatMap((card) => card.buttons ?? []) : [];
    }
    case "template": {
      const result = TEMPLATE_CONTENT.safeParse(payload);
      return result.success ? quickReplies(result.data.components ?? []) : [];
    }
    default:
      return [];
  }
}

/**
 * A template's quick-reply buttons, as the Cloud API takes their payloads
 * (`{"type":"button","sub_type":"quick_reply","parameters":[{"type":"payload","payload":…}]}`):
 * the payload is the button's id and, the template's own text being unknown here, its title.
 */
function quickReplies(components: Record<string, unknown>[]): Button[] {
  return components.flatMap((component) => {
    if (component.type !== "button" || component.sub_type !== "quick_reply") return [];
    const parameters = Array.isArray(component.parameters) ? component.parameters : [];
    return parameters.flatMap((parameter: { type?: unknown; payload?: unknown }) =>
      parameter?.type === "payload" && typeof parameter.payload === "string" &&
        NOT_BLANK.test(parameter.payload)
        ? [{ id: parameter.payload, title: parameter.payload }]
        : []
    );
  });
}
