/**
 * How any message degrades to plain text for a channel that cannot render its kind natively
 * (CONTRACT §4: "degrade to plain text, never drop"). Pure: no I/O.
 */

import type { z } from "zod";
import { buttonsOffered, type MessageType } from "./message_kinds.ts";
import {
  type Button,
  BUTTONS_CONTENT,
  CARD_CONTENT,
  type CardContent,
  CAROUSEL_CONTENT,
  FORM_CONTENT,
  NOT_BLANK,
  STORED_MEDIA_CONTENT,
  TEMPLATE_CONTENT,
  type TemplateContent,
} from "./rich_content.ts";

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
 * field; `image` and `file` the caption (else the file name) then the URL; `template` its name
 * and language, the texts it fills in, then a `• payload` line per quick reply (the template's own
 * wording is at Meta). A payload that does not fit its type falls back to `content`.
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
      return renderWith(
        TEMPLATE_CONTENT,
        payload,
        content,
        (doc) =>
          [...templateLines(doc), ...buttonLines(buttonsOffered("template", doc))].join("\n"),
      );
  }
}

/**
 * A template as lines, its quick replies aside: `Template {name} ({language})`, then the texts
 * it fills in, joined by ` · `.
 */
export function templateLines(doc: TemplateContent): string[] {
  const filled = templateTexts(doc.components ?? []);
  return [
    `Template ${doc.name} (${doc.language})`,
    ...(filled.length > 0 ? [filled.join(" · ")] : []),
  ];
}

/**
 * The texts a template's header and body parameters fill in (`text`, and the `fallback_value` of
 * a currency or date), in order.
 */
function templateTexts(components: Record<string, unknown>[]): string[] {
  return components.flatMap((component) => {
    if (component.type !== "header" && component.type !== "body") return [];
    const parameters = Array.isArray(component.parameters) ? component.parameters : [];
    return parameters.flatMap((parameter: Record<string, unknown> | null) => {
      const text = parameter?.type === "text"
        ? parameter.text
        : (parameter?.[String(parameter?.type)] as { fallback_value?: unknown } | undefined)
          ?.fallback_value;
      return typeof text === "string" && isPresent(text) ? [text] : [];
    });
  });
}
