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

/** Longest id (button id, form field name), in characters. */
const MAX_ID_LENGTH = 256;
/** Longest title (button, card, form, field label, file name), in characters. */
const MAX_TITLE_LENGTH = 256;
/** Longest free text inside a document (buttons text, card subtitle, caption), in characters. */
const MAX_TEXT_LENGTH = 4096;
/** Longest URL, in characters. */
const MAX_URL_LENGTH = 2048;
/** Longest WhatsApp template name (the Cloud API's own limit), in characters. */
const MAX_TEMPLATE_NAME_LENGTH = 512;
/** Longest WhatsApp template language code (e.g. `en_US`), in characters. */
const MAX_LANGUAGE_LENGTH = 32;
/** Most buttons in a `buttons` message. */
const MAX_BUTTONS = 10;
/** Most buttons on one card. */
const MAX_CARD_BUTTONS = 5;
/** Most cards in a carousel. */
const MAX_CAROUSEL_CARDS = 10;
/** Most fields in a form. */
const MAX_FORM_FIELDS = 10;

/** Form field input types. */
const FORM_FIELD_TYPES = ["text", "email", "number"] as const;

/** Matches a string that is not blank after trim (`\s` is exactly the set `trim()` removes). */
const NOT_BLANK = /\S/;

/** A required string: present, not blank after trim, at most `max` characters. */
function requiredString(max: number) {
  return z.string().regex(NOT_BLANK, "is required").max(max, `must be at most ${max} characters`);
}

/** An optional string of at most `max` characters; blank is allowed and treated as absent. */
function optionalString(max: number) {
  return z.string().max(max, `must be at most ${max} characters`).optional();
}

/** Whether `value` is an absolute https URL without credentials and without outer whitespace. */
function isHttpsUrl(value: string): boolean {
  if (value !== value.trim() || !/^https:\/\//i.test(value)) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return url.protocol === "https:" && url.username === "" && url.password === "";
}

/**
 * An https URL: at most 2048 characters, starts with `https://`, parses with `new URL`, protocol
 * `https:`, no username or password, no leading or trailing whitespace.
 */
function httpsUrl() {
  return z
    .string()
    .max(MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`)
    .refine(isHttpsUrl, "must be an https URL")
    .meta({ format: "uri" });
}

/** The message for an array count limit `min..max`. */
function countMessage(min: number, max: number): string {
  return min === 0 ? `must have at most ${max} items` : `must have ${min} to ${max} items`;
}

/**
 * One button: `{"id": str, "title": str}`. `id` is required, at most 256 characters, and unique
 * within one message; `title` is required, at most 256 characters.
 */
export const BUTTON = z.object({
  id: requiredString(MAX_ID_LENGTH),
  title: requiredString(MAX_TITLE_LENGTH),
});

/** One button (see {@linkcode BUTTON}). */
export type Button = z.infer<typeof BUTTON>;

/**
 * Adds a `custom` issue for every button whose id repeats an earlier id in `seen`, which is
 * shared across one message so that ids stay unique message-wide (a carousel's cards too).
 */
function reportDuplicateIds(
  buttons: readonly Button[] | undefined,
  path: readonly PropertyKey[],
  seen: Set<string>,
  ctx: z.RefinementCtx,
): void {
  buttons?.forEach((button, index) => {
    if (seen.has(button.id)) {
      ctx.addIssue({
        code: "custom",
        message: "must be unique within the message",
        path: [...path, index, "id"],
      });
    }
    seen.add(button.id);
  });
}

/** The plain card shape, without the duplicate-id check (shared by card and carousel). */
const CARD_SHAPE = z.object({
  title: requiredString(MAX_TITLE_LENGTH),
  subtitle: optionalString(MAX_TEXT_LENGTH),
  image_url: httpsUrl().optional(),
  buttons: z
    .array(BUTTON)
    .max(MAX_CARD_BUTTONS, countMessage(0, MAX_CARD_BUTTONS))
    .optional(),
});

/**
 * `card` content: `{"title": str, "subtitle"?: str, "image_url"?: https URL, "buttons"?: [button]}`.
 * `title` is required (≤ 256 characters), `subtitle` ≤ 4096 characters, at most 5 buttons with
 * unique ids.
 */
export const CARD_CONTENT = CARD_SHAPE.superRefine((card, ctx) => {
  reportDuplicateIds(card.buttons, ["buttons"], new Set(), ctx);
});

/** A card (see {@linkcode CARD_CONTENT}). */
export type CardContent = z.infer<typeof CARD_CONTENT>;

/**
 * `buttons` content: `{"text": str, "buttons": [button]}`. `text` is required (≤ 4096
 * characters); 1 to 10 buttons with unique ids.
 */
export const BUTTONS_CONTENT = z
  .object({
    text: requiredString(MAX_TEXT_LENGTH),
    buttons: z
      .array(BUTTON)
      .min(1, countMessage(1, MAX_BUTTONS))
      .max(MAX_BUTTONS, countMessage(1, MAX_BUTTONS)),
  })
  .superRefine((doc, ctx) => {
    reportDuplicateIds(doc.buttons, ["buttons"], new Set(), ctx);
  });

/** A buttons message (see {@linkcode BUTTONS_CONTENT}). */
export type ButtonsContent = z.infer<typeof BUTTONS_CONTENT>;

/**
 * `carousel` content: `{"cards": [card]}` with 1 to 10 cards (each as {@linkcode CARD_CONTENT}).
 * Button ids are unique across all cards of the carousel.
 */
export const CAROUSEL_CONTENT = z
  .object({
    cards: z
      .array(CARD_SHAPE)
      .min(1, countMessage(1, MAX_CAROUSEL_CARDS))
      .max(MAX_CAROUSEL_CARDS, countMessage(1, MAX_CAROUSEL_CARDS)),
  })
  .superRefine((doc, ctx) => {
    const seen = new Set<string>();
    doc.cards.forEach((card, index) => {
      reportDuplicateIds(card.buttons, ["cards", index, "buttons"], seen, ctx);
    });
  });

/** A carousel (see {@linkcode CAROUSEL_CONTENT}). */
export type CarouselContent = z.infer<typeof CAROUSEL_CONTENT>;

/**
 * One form field: `{"name": str, "label": str, "type": "text" | "email" | "number"}`. `name` is
 * required (≤ 256 characters) and unique within the form; `label` is required (≤ 256 characters).
 */
export const FORM_FIELD = z.object({
  name: requiredString(MAX_ID_LENGTH),
  label: requiredString(MAX_TITLE_LENGTH),
  type: z.enum(FORM_FIELD_TYPES),
});

/** One form field (see {@linkcode FORM_FIELD}). */
export type FormField = z.infer<typeof FORM_FIELD>;

/**
 * `form` content: `{"title": str, "fields": [field]}`. `title` is required (≤ 256 characters);
 * 1 to 10 fields with unique names.
 */
export const FORM_CONTENT = z
  .object({
    title: requiredString(MAX_TITLE_LENGTH),
    fields: z
      .array(FORM_FIELD)
      .min(1, countMessage(1, MAX_FORM_FIELDS))
      .max(MAX_FORM_FIELDS, countMessage(1, MAX_FORM_FIELDS)),
  })
  .superRefine((doc, ctx) => {
    const seen = new Set<string>();
    doc.fields.forEach((field, index) => {
      if (seen.has(field.name)) {
        ctx.addIssue({
          code: "custom",
          message: "must be unique within the form",
          path: ["fields", index, "name"],
        });
      }
      seen.add(field.name);
    });
  });

/** A form (see {@linkcode FORM_CONTENT}). */
export type FormContent = z.infer<typeof FORM_CONTENT>;

/**
 * `image` and `file` content: `{"url": https URL, "caption"?: str, "filename"?: str}`. `caption`
 * ≤ 4096 characters, `filename` ≤ 256 characters.
 */
export const MEDIA_CONTENT = z.object({
  url: httpsUrl(),
  caption: optionalString(MAX_TEXT_LENGTH),
  filename: optionalString(MAX_TITLE_LENGTH),
});

/** An image or file (see {@linkcode MEDIA_CONTENT}). */
export type MediaContent = z.infer<typeof MEDIA_CONTENT>;

/**
 * An image or file as stored, which may also link with http: the media links Parley gives files
 * received from a channel start with `PUBLIC_BASE_URL`, http in development. Shown as text only.
 */
const STORED_MEDIA_CONTENT = MEDIA_CONTENT.extend({
  url: z.string().refine((value) => isHttpsUrl(value.replace(/^http:\/\//i, "https://"))),
});

/**
 * `template` content (WhatsApp only): `{"name": str, "language": str, "components"?: [object]}`.
 * `name` is required (≤ 512 characters), `language` is the required language code (≤ 32
 * characters, e.g. `en_US`; the WhatsApp adapter sends it as `{"code": language}`), and
 * `components` are passed through to the WhatsApp Cloud API as given, checked only to be an
 * array of objects.
 */
export const TEMPLATE_CONTENT = z.object({
  name: requiredString(MAX_TEMPLATE_NAME_LENGTH),
  language: requiredString(MAX_LANGUAGE_LENGTH),
  components: z.array(z.looseObject({})).optional(),
});

/** A WhatsApp template message (see {@linkcode TEMPLATE_CONTENT}). */
export type TemplateContent = z.infer<typeof TEMPLATE_CONTENT>;

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

/** Whether `value` is a string with something other than whitespace in it. */
function isPresent(value: string | undefined): value is string {
  return value !== undefined && NOT_BLANK.test(value);
}

/** Bullet lines for button titles. */
function buttonLines(buttons: readonly Button[] | undefined): string[] {
  return (buttons ?? []).map((button) => `• ${button.title}`);
}

/** A card as lines: title, subtitle, image URL, buttons. */
function cardText(card: CardContent): string {
  return [
    card.title,
    ...(isPresent(card.subtitle) ? [card.subtitle] : []),
    ...(card.image_url === undefined ? [] : [card.image_url]),
    ...buttonLines(card.buttons),
  ].join("\n");
}

/** Renders `payload` with `render` if it fits `schema`, else falls back to `content`. */
function renderWith<T>(
  schema: z.ZodType<T>,
  payload: unknown,
  content: string,
  render: (document: T) => string,
): string {
  const result = schema.safeParse(payload);
  return result.success ? render(result.data) : content;
}

/**
 * A plain-text rendering of a message of any type, for channels that cannot render the type
 * natively (degrade to plain text, never drop). `text` and `markdown` yield `content`; `buttons`
 * the text then a `• Title` line per button; `card` the title, subtitle, image URL and button
 * lines; `carousel` its cards separated by blank lines; `form` the title then a `Label:` line per
 * field; `image` and `file` the caption (else the file name) then the URL; `template` the
 * template name. A payload that does not fit its type falls back to `content`.
 */
export function plainTextOf(messageType: MessageType, payload: unknown, content: string): string {
  switch (messageType) {
    case "text":
    case "markdown":
      return content;
    case "buttons":
      return renderWith(
        BUTTONS_CONTENT,
        payload,
        content,
        (doc) => [doc.text, ...buttonLines(doc.buttons)].join("\n"),
      );
    case "card":
      return renderWith(CARD_CONTENT, payload, content, cardText);
    case "carousel":
      return renderWith(
        CAROUSEL_CONTENT,
        payload,
        content,
        (doc) => doc.cards.map(cardText).join("\n\n"),
      );
    case "form":
      return renderWith(
        FORM_CONTENT,
        payload,
        content,
        (doc) => [doc.title, ...doc.fields.map((field) => `${field.label}:`)].join("\n"),
      );
    case "image":
    case "file":
      return renderWith(STORED_MEDIA_CONTENT, payload, content, (doc) => {
        const label = isPresent(doc.caption)
          ? doc.caption
          : isPresent(doc.filename)
          ? doc.filename
          : undefined;
        return label === undefined ? doc.url : `${label}\n${doc.url}`;
      });
    case "template":
      return renderWith(TEMPLATE_CONTENT, payload, content, (doc) => doc.name);
  }
}

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
