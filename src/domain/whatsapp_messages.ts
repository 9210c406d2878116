/**
 * Parley messages as WhatsApp Cloud API message bodies (CONTRACT §4.2, §6.1): up to 3 buttons
 * become reply buttons, 4 to 10 a list, a card an image header with text and buttons, a carousel
 * one message group per card, Markdown WhatsApp's formatting, media and templates their own
 * types, and anything WhatsApp cannot show natively its plain-text form — never dropped. Text over
 * a limit is split into several messages; a title over its limit is cut with "…" and shown in full
 * in the body or row description. Button ids are routed so that an inbound reply maps back to the
 * Parley button ({@linkcode buttonIdOfReply}). Pure: no I/O.
 */

import type { z } from "zod";
import type { MessageType } from "./message_kinds.ts";
import { plainTextOf } from "./plain_text.ts";
import {
  type Button,
  BUTTONS_CONTENT,
  CARD_CONTENT,
  type CardContent,
  CAROUSEL_CONTENT,
  MEDIA_CONTENT,
  type MediaContent,
  TEMPLATE_CONTENT,
} from "./rich_content.ts";
import {
  boldText,
  LIMITS,
  oneLine,
  splitTail,
  splitText,
  toWhatsAppFormatting,
  truncateText,
  uniqueTitles,
  withFullTitles,
} from "./whatsapp_formatting.ts";

/** The label of the button that opens a list (Parley documents carry none). */
const LIST_BUTTON_LABEL = "Choose an option";
/** The title of the one section of a `buttons` message's list. */
const LIST_SECTION_TITLE = "Options";
/** Prefix of the reply id sent for a button whose own id cannot be sent as it is. */
const FALLBACK_ID_PREFIX = "parley_button:";

/** A reply button of an interactive `button` message. */
export type WhatsAppReplyButton = { type: "reply"; reply: { id: string; title: string } };

/** A row of an interactive `list` message. */
export type WhatsAppListRow = { id: string; title: string; description?: string };

/** The `interactive` object of a reply-buttons or list message. */
export type WhatsAppInteractive =
  | {
    type: "button";
    header?: { type: "image"; image: { link: string } };
    body: { text: string };
    action: { buttons: WhatsAppReplyButton[] };
  }
  | {
    type: "list";
    body: { text: string };
    action: { button: string; sections: { title: string; rows: WhatsAppListRow[] }[] };
  };

/** One Cloud API message body without `messaging_product`, `recipient_type` and `to` (the sender adds them). */
export type WhatsAppMessage =
  | { type: "text"; text: { body: string; preview_url?: boolean } }
  | { type: "interactive"; interactive: WhatsAppInteractive }
  | { type: "image"; image: { link: string; caption?: string } }
  | { type: "document"; document: { link: string; caption?: string; filename?: string } }
  | {
    type: "template";
    template: { name: string; language: { code: string }; components?: object[] };
  };

/**
 * The id a button is sent with: its Parley id when WhatsApp can carry it (at most `max`
 * characters, no outer whitespace), else `parley_button:<index>`. A Parley id that itself starts
 * with that prefix is replaced too, so that no two buttons of one message are sent with one id.
 */
function routedId(id: string, index: number, max: number): string {
  const sendable = id.length <= max && id === id.trim() && !id.startsWith(FALLBACK_ID_PREFIX);
  return sendable ? id : `${FALLBACK_ID_PREFIX}${index}`;
}

/** Whether `value` has something other than whitespace in it. */
function isPresent(value: string | undefined): value is string {
  return value !== undefined && /\S/.test(value);
}

/** A text message with a body that already fits. */
function textMessage(body: string): WhatsAppMessage {
  return { type: "text", text: { body } };
}

/** `text` as text messages of at most 4096 characters each. */
function textMessages(text: string): WhatsAppMessage[] {
  return splitText(text, LIMITS.textBody).map(textMessage);
}

/** Buttons offered under a text; `firstIndex` is the first button's index in the whole message. */
type Choice = { text: string; buttons: Button[]; firstIndex: number };

/**
 * Up to 3 buttons as one interactive reply-buttons message, with an image header when
 * `imageUrl` is set. Full titles that did not fit go into the body; a body over 1024 characters
 * sends its beginning first as text messages.
 */
function replyButtonMessages(choice: Choice, imageUrl?: string): WhatsAppMessage[] {
  const titles = choice.buttons.map((button) => oneLine(button.title));
  const shown = uniqueTitles(titles, LIMITS.replyTitle);
  const cut = titles.filter((title, index) => !shown[index].startsWith(title));
  const { head, tail } = splitTail(withFullTitles(choice.text, cut), LIMITS.replyBody);
  const interactive: WhatsAppInteractive = {
    type: "button",
    ...(imageUrl === undefined ? {} : { header: { type: "image", image: { link: imageUrl } } }),
    body: { text: tail },
    action: {
      buttons: choice.buttons.map((button, index) => ({
        type: "reply",
        reply: {
          id: routedId(button.id, choice.firstIndex + index, LIMITS.replyId),
          title: shown[index],
        },
      })),
    },
  };
  return [...textMessages(head), { type: "interactive", interactive }];
}

/** A button as a list row; a title over 24 characters is cut and kept whole in the description. */
function listRow(button: Button, index: number): WhatsAppListRow {
  const title = oneLine(button.title);
  const row = {
    id: routedId(button.id, index, LIMITS.rowId),
    title: truncateText(title, LIMITS.rowTitle),
  };
  if (title.length <= LIMITS.rowTitle) return row;
  return { ...row, description: truncateText(title, LIMITS.rowDescription) };
}

/**
 * 4 to 10 buttons as one interactive list message with one section. Titles too long even for a
 * row description (72 characters) go whole into the body; a body over 4096 characters sends its
 * beginning first as text messages.
 */
function listMessages(choice: Choice, sectionTitle: string): WhatsAppMessage[] {
  const rows = choice.buttons.map((button, index) => listRow(button, choice.firstIndex + index));
  const cut = choice.buttons.map((button) => oneLine(button.title))
    .filter((title) => title.length > LIMITS.rowDescription);
  const { head, tail } = splitTail(withFullTitles(choice.text, cut), LIMITS.listBody);
  const interactive: WhatsAppInteractive = {
    type: "list",
    body: { text: tail },
    action: {
      button: LIST_BUTTON_LABEL,
      sections: [{ title: truncateText(sectionTitle, LIMITS.sectionTitle), rows }],
    },
  };
  return [...textMessages(head), { type: "interactive", interactive }];
}

/**
 * Up to 3 buttons as reply buttons (under the image as header, if any); 4 or more as a list, after
 * the image as a message of its own, since a list header can only be text.
 */
function choiceMessages(
  choice: Choice,
  options: { imageUrl?: string; sectionTitle: string },
): WhatsAppMessage[] {
  const { imageUrl, sectionTitle } = options;
  if (choice.buttons.length <= LIMITS.replyButtons) return replyButtonMessages(choice, imageUrl);
  const lead = imageUrl === undefined ? [] : imageMessages(imageUrl);
  return [...lead, ...listMessages(choice, sectionTitle)];
}

/** A caption cut to 1024 characters, and what did not fit as text messages to follow. */
function captionParts(caption: string | undefined): [string | undefined, WhatsAppMessage[]] {
  const [first, ...rest] = splitText(caption ?? "", LIMITS.textBody, { firstMax: LIMITS.caption });
  return [first, rest.map(textMessage)];
}

/** An image message, then any caption overflow. */
function imageMessages(link: string, caption?: string): WhatsAppMessage[] {
  const [first, overflow] = captionParts(caption);
  return [
    { type: "image", image: first === undefined ? { link } : { link, caption: first } },
    ...overflow,
  ];
}

/** A document message with its file name, then any caption overflow. */
function documentMessages(media: MediaContent): WhatsAppMessage[] {
  const [first, overflow] = captionParts(media.caption);
  const document = {
    link: media.url,
    ...(first === undefined ? {} : { caption: first }),
    ...(isPresent(media.filename) ? { filename: media.filename } : {}),
  };
  return [{ type: "document", document }, ...overflow];
}

/**
 * A card: its text (the title in bold, then the subtitle) with its buttons as a choice (see
 * {@linkcode choiceMessages}); without buttons, the image with the text as caption, or the text.
 */
function cardMessages(card: CardContent, firstIndex: number): WhatsAppMessage[] {
  const title = oneLine(card.title);
  const text = isPresent(card.subtitle) ? `${boldText(title)}\n${card.subtitle}` : boldText(title);
  const buttons = card.buttons ?? [];
  if (buttons.length > 0) {
    return choiceMessages({ text, buttons, firstIndex }, {
      imageUrl: card.image_url,
      sectionTitle: title,
    });
  }
  return card.image_url === undefined ? textMessages(text) : imageMessages(card.image_url, text);
}

/** The buttons of a `buttons`, `card` or `carousel` message, one group per message part, in order. */
function buttonGroups(messageType: MessageType, payload: unknown): Button[][] {
  switch (messageType) {
    case "buttons":
      return [BUTTONS_CONTENT.safeParse(payload).data?.buttons ?? []];
    case "card":
      return [CARD_CONTENT.safeParse(payload).data?.buttons ?? []];
    case "carousel":
      return (CAROUSEL_CONTENT.safeParse(payload).data?.cards ?? []).map((card) =>
        card.buttons ?? []
      );
    default:
      return [];
  }
}

/**
 * The Parley button id behind an inbound `button_reply.id` or `list_reply.id` for a message
 * rendered by {@linkcode renderWhatsAppMessages}: a button's own id when it was sent as it is, or
 * the button at `<index>` (counted across a carousel's cards) for `parley_button:<index>`.
 *
 * @returns the Parley button id, or null when the message offers no button with that reply id.
 */
export function buttonIdOfReply(
  messageType: MessageType,
  payload: unknown,
  replyId: string,
): string | null {
  let index = 0;
  for (const buttons of buttonGroups(messageType, payload)) {
    const max = buttons.length <= LIMITS.replyButtons ? LIMITS.replyId : LIMITS.rowId;
    for (const button of buttons) {
      if (routedId(button.id, index, max) === replyId) return button.id;
      index++;
    }
  }
  return null;
}

/**
 * `render(document)` when the message's payload fits `schema`, else its plain text as text
 * messages (`plainTextOf`: readable where it can be, never the payload's JSON).
 */
function renderParsed<T>(
  schema: z.ZodType<T>,
  message: { message_type: MessageType; content: string; payload: unknown },
  render: (document: T) => WhatsAppMessage[],
): WhatsAppMessage[] {
  const parsed = schema.safeParse(message.payload);
  return parsed.success
    ? render(parsed.data)
    : textMessages(plainTextOf(message.message_type, message.payload, message.content));
}

/**
 * The WhatsApp Cloud API messages that show one Parley message, in sending order: `text` as text
 * messages, `markdown` the same in WhatsApp formatting; `buttons` as reply buttons (up to 3) or a
 * list (4 to 10); `card` as its bold title and subtitle with its buttons the same way, an image as
 * the reply-buttons header or sent before the list, or without buttons the image captioned with
 * the text; `carousel` as each card's messages in turn; `image` with its caption (else file name),
 * `file` as a document, `template` with its components passed through; `form`, and a payload that
 * does not fit its type, as plain text (`plainTextOf`, or `content`). Text over a limit continues
 * in further messages; a blank text gives no message. Buttons are sent with their Parley id when
 * it fits, else `parley_button:<index>` ({@linkcode buttonIdOfReply} maps either back).
 */
export function renderWhatsAppMessages(
  message: { message_type: MessageType; content: string; payload: unknown },
): WhatsAppMessage[] {
  const { message_type: type, content, payload } = message;
  switch (type) {
    case "text":
      return textMessages(content);
    case "markdown": {
      // Markdown that formats to nothing visible (an empty heading, say) is sent as written.
      const formatted = toWhatsAppFormatting(content);
      return textMessages(formatted.trim() === "" ? content : formatted);
    }
    case "buttons":
      return renderParsed(
        BUTTONS_CONTENT,
        message,
        (doc) => choiceMessages({ ...doc, firstIndex: 0 }, { sectionTitle: LIST_SECTION_TITLE }),
      );
    case "card":
      return renderParsed(CARD_CONTENT, message, (card) => cardMessages(card, 0));
    case "carousel":
      return renderParsed(CAROUSEL_CONTENT, message, (doc) => {
        let firstIndex = 0;
        return doc.cards.flatMap((card) => {
          const messages = cardMessages(card, firstIndex);
          firstIndex += card.buttons?.length ?? 0;
          return messages;
        });
      });
    // A link that is not https (a development setup's own, say) is sent as text.
    case "image":
      return renderParsed(
        MEDIA_CONTENT,
        message,
        (media) => imageMessages(media.url, [media.caption, media.filename].find(isPresent)),
      );
    case "file":
      return renderParsed(MEDIA_CONTENT, message, documentMessages);
    case "template":
      return renderParsed(TEMPLATE_CONTENT, message, (doc) => [{
        type: "template",
        template: {
          name: doc.name,
          language: { code: doc.language },
          ...(doc.components === undefined ? {} : { components: doc.components }),
        },
      }]);
    case "form":
      return textMessages(plainTextOf(type, payload, content));
  }
}
