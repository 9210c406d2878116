/**
 * The JSON documents that rich messages carry in `content` (CONTRACT §4), as zod schemas with the
 * contract's limits: buttons, cards, carousels, forms, media and WhatsApp templates. Each schema
 * validates a client's document and documents itself in the OpenAPI document. Pure: no I/O.
 */

import { z } from "zod";
/** Longest id (button id, form field name, a template quick reply's payload), in characters. */
export const MAX_ID_LENGTH = 256;
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

/**
 * Matches a string with something visible in it: not only white space (`\s`, what `trim()`
 * removes) and invisible characters — format characters (`\p{Cf}`: zero-width space and joiners,
 * the soft hyphen, the byte order mark) and the Hangul fillers — which render as a blank button or
 * title on Slack and WhatsApp.
 */
export const NOT_BLANK = /[^\s\p{Cf}\u115F\u1160\u3164\uFFA0]/u;

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
 * `https:`, no username or password, no leading or trailing whitespace. (Control characters are
 * refused on input only: {@linkcode urlWithControlCharacter}.)
 */
function httpsUrl() {
  return z
    .string()
    .max(MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`)
    .refine(isHttpsUrl, "must be an https URL")
    .meta({ format: "uri" });
}

/** An array of `min` to `max` items of `item`, saying so when it has more or fewer. */
function arrayOf<T extends z.ZodType>(item: T, min: number, max: number) {
  const message = min === 0 ? `must have at most ${max} items` : `must have ${min} to ${max} items`;
  return z.array(item).min(min, message).max(max, message);
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
  buttons: arrayOf(BUTTON, 0, MAX_CARD_BUTTONS).optional(),
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
    buttons: arrayOf(BUTTON, 1, MAX_BUTTONS),
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
    cards: arrayOf(CARD_SHAPE, 1, MAX_CAROUSEL_CARDS),
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
    fields: arrayOf(FORM_FIELD, 1, MAX_FORM_FIELDS),
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
export const STORED_MEDIA_CONTENT = MEDIA_CONTENT.extend({
  url: z.string().refine((value) => isHttpsUrl(value.replace(/^http:\/\//i, "https://"))),
});

/**
 * `template` content (WhatsApp only): `{"name": str, "language": str, "components"?: [object]}`.
 * `name` is required (≤ 512 characters), `language` is the required language code (≤ 32
 * characters, e.g. `en_US`; the WhatsApp adapter sends it as `{"code": language}`), and
 * `components` are passed through to the WhatsApp Cloud API as given, checked only to be an
 * array of objects whose quick-reply payloads are at most 256 characters (a button id's bound).
 */
export const TEMPLATE_CONTENT = z.object({
  name: requiredString(MAX_TEMPLATE_NAME_LENGTH),
  language: requiredString(MAX_LANGUAGE_LENGTH),
  components: z.array(z.looseObject({})).optional(),
}).superRefine((template, ctx) => {
  // A quick reply's payload comes back as the id of the button clicked, on every channel: it is
  // held to a button id's length.
  template.components?.forEach((component, index) => {
    if (component.type !== "button" || component.sub_type !== "quick_reply") return;
    const parameters = Array.isArray(component.parameters) ? component.parameters : [];
    parameters.forEach((parameter: { payload?: unknown }, at: number) => {
      const payload = parameter?.payload;
      if (typeof payload === "string" && payload.length > MAX_ID_LENGTH) {
        ctx.addIssue({
          code: "custom",
          message: `must be at most ${MAX_ID_LENGTH} characters`,
          path: ["components", index, "parameters", at, "payload"],
        });
      }
    });
  });
});

/** A WhatsApp template message (see {@linkcode TEMPLATE_CONTENT}). */
export type TemplateContent = z.infer<typeof TEMPLATE_CONTENT>;

/** The names of the URL fields of the rich kinds (`image_url` of a card, `url` of a file). */
const URL_FIELDS = new Set(["url", "image_url"]);

/**
 * The path (`cards.1.image_url`) of a URL field of a rich document holding a control character,
 * or null. The URL parser drops a tab or newline inside one silently, so the text stored and sent
 * on would not be the address checked: such a URL is refused when a message or Flow is given —
 * not when one stored before this rule is read, which goes on showing as it did.
 */
export function urlWithControlCharacter(document: unknown, path: string[] = []): string | null {
  if (typeof document !== "object" || document === null) return null;
  for (const [key, value] of Object.entries(document)) {
    const at = [...path, key];
    if (typeof value === "string") {
      if (URL_FIELDS.has(key) && /\p{Cc}/u.test(value)) return at.join(".");
    } else {
      const found = urlWithControlCharacter(value, at);
      if (found !== null) return found;
    }
  }
  return null;
}
