/**
 * Renders a Parley message as Slack Block Kit (CONTRACT §4.2): card and buttons become section
 * and actions blocks, a carousel a series of cards between dividers, markdown mrkdwn sections,
 * text an escaped section, image an image block, file a link, a WhatsApp template its name and
 * filled-in texts with its quick replies as buttons; form and any payload that does not fit its
 * schema degrade to plain text. Slack's limits are met by splitting (text
 * across sections, blocks across several `chat.postMessage` bodies) or by visible truncation
 * ending in "…", never by failing or dropping content. Button clicks are routed back through
 * the `block_id` and `value` this module writes ({@linkcode parseSlackAction}). Pure: no I/O.
 */

import { buttonsOffered, type MessageType } from "./message_kinds.ts";
import { plainTextOf, templateLines } from "./plain_text.ts";
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
import { literalMarkers } from "./literal_markers.ts";
import {
  escapeMrkdwn,
  markdownToMrkdwn,
  mrkdwnLink,
  splitMrkdwn,
  textToMrkdwn,
  truncateMrkdwn,
  truncatePlain,
} from "./slack_mrkdwn.ts";
import { MAX_REPLY_CONTEXT } from "./slack_reply_context.ts";

/** Most blocks in one message (Block Kit reference). */
const MAX_BLOCKS = 50;
/** Longest section text (Block Kit section block). */
const MAX_SECTION_TEXT = 3_000;
/** Most elements in one actions block, and in one context block. */
const MAX_ACTIONS_ELEMENTS = 25;
const MAX_CONTEXT_ELEMENTS = 10;
/** Longest button label (plain_text) and image alt text. */
const MAX_BUTTON_TEXT = 75;
const MAX_ALT_TEXT = 2_000;
/**
 * Most text characters across one message's blocks. Slack rejects larger payloads with
 * `msg_blocks_too_long` at an undocumented ~12,000 (slackapi/bolt-js#2509, #2867); this stays
 * below it with room for the block containers.
 */
const MAX_MESSAGE_TEXT = 10_000;
/** Longest top-level `text` (the notification fallback); Slack recommends under 4,000. */
const MAX_FALLBACK_TEXT = 3_000;
/** Longest button id that can come back as a button's `value` (see `message_kinds.ts`). */
const MAX_BUTTON_ID = 256;
/** Shown when a message renders to nothing at all, so that it is still visibly delivered. */
const EMPTY_MESSAGE = "(empty message)";

/** A `plain_text` text object. */
export type SlackPlainText = { type: "plain_text"; text: string; emoji: true };
/**
 * A `mrkdwn` text object. `verbatim` turns off Slack's automatic parsing (bare URLs, channel
 * names, certain mentions), so customer text only links where this module made a link.
 */
export type SlackMrkdwn = { type: "mrkdwn"; text: string; verbatim: true };
/** A button element; `action_id` and `value` follow {@linkcode buttonActionId}. */
export type SlackButton = {
  type: "button";
  text: SlackPlainText;
  action_id: string;
  value: string;
};
/** An image element (a section's accessory). */
export type SlackImageElement = { type: "image"; image_url: string; alt_text: string };
/** A section block: mrkdwn text of at most 3,000 characters, optionally an image beside it. */
export type SlackSectionBlock = {
  type: "section";
  text: SlackMrkdwn;
  accessory?: SlackImageElement;
};
/** An actions block of at most 25 buttons; `block_id` follows {@linkcode actionsBlockId}. */
export type SlackActionsBlock = { type: "actions"; block_id: string; elements: SlackButton[] };
/** An image block. */
export type SlackImageBlock = {
  type: "image";
  image_url: string;
  alt_text: string;
  /** Shown above the image (the file's name). */
  title?: SlackPlainText;
};
/** A context block (small print) of at most 10 elements. */
export type SlackContextBlock = { type: "context"; elements: SlackMrkdwn[] };
/** A divider block. */
export type SlackDividerBlock = { type: "divider" };
/** Any block this renderer produces. */
export type SlackBlock =
  | SlackSectionBlock
  | SlackActionsBlock
  | SlackImageBlock
  | SlackContextBlock
  | SlackDividerBlock;

/**
 * One `chat.postMessage` body, without `channel` and `thread_ts`: at most 50 blocks, and `text`
 * the notification and accessibility fallback (escaped mrkdwn, at most 3,000 characters).
 */
export interface SlackMessage {
  text: string;
  blocks: SlackBlock[];
}

/** What {@linkcode renderSlackMessage} needs of a stored message. */
export interface SlackMessageSource {
  id: number;
  message_type: MessageType;
  content: string;
  payload: unknown;
}

/** How a message is rendered. */
export interface SlackRenderOptions {
  /**
   * A line of small print (escaped mrkdwn, cut at {@linkcode MAX_REPLY_CONTEXT} characters)
   * that opens the first post, above the message and in its fallback text: what a reply quotes,
   * the ad a customer came from.
   * The first post keeps room for it whatever its length, so a message splits into the same
   * posts whatever the line says.
   * @default undefined
   */
  lead?: string;
  /**
   * The message's links were written by someone outside the business (a web visitor's file is
   * wherever they say it is): a file's name is shown beside its address, not laid over it, so
   * that a name dressed as another address (`https://bank.example/invoice.pdf`) cannot hide
   * where the link leads.
   * @default false
   */
  showLinkAddresses?: boolean;
}

/** Room a post keeps for something more than the message. */
type Reserve = { blocks: number; text: number };
const NO_RESERVE: Reserve = { blocks: 0, text: 0 };

/** A block and its share of the fallback text. */
type Piece = { block: SlackBlock; fallback: string };

/** Counters that make button and block ids unique within one message. */
type RenderState = {
  messageId: number;
  buttons: number;
  actionsBlocks: number;
  showLinkAddresses: boolean;
};

/** The `action_id` of the button at `index` in a message (running across a carousel's cards). */
export function buttonActionId(index: number): string {
  return `parley_button:${index}`;
}

/** The `block_id` of the `n`-th actions block (0, 1, …) of message `messageId`. */
export function actionsBlockId(messageId: number, n: number): string {
  return `parley_message:${messageId}:${n}`;
}

/** Matches {@linkcode actionsBlockId}. */
const ACTIONS_BLOCK_ID = /^parley_message:(0|[1-9]\d{0,15}):(0|[1-9]\d{0,15})$/;

/**
 * Reads back a click on a button this module rendered: the message from the actions block's
 * `block_id`, the button id from the button's `value`.
 *
 * @returns `null` for a block id or value that is not ours.
 */
export function parseSlackAction(
  blockId: string,
  value: string,
): { messageId: number; buttonId: string } | null {
  const match = ACTIONS_BLOCK_ID.exec(blockId);
  // No button id holds a NUL (PostgreSQL text cannot): such a value clicks nothing.
  if (
    match === null || value.trim() === "" || value.length > MAX_BUTTON_ID || value.includes("\0")
  ) {
    return null;
  }
  const messageId = Number(match[1]);
  return Number.isSafeInteger(messageId) ? { messageId, buttonId: value } : null;
}

/** A piece for `block` with `fallback` text. */
function piece(block: SlackBlock, fallback = ""): Piece {
  return { block, fallback };
}

/** A mrkdwn text object. */
function mrkdwn(text: string): SlackMrkdwn {
  return { type: "mrkdwn", text, verbatim: true };
}

/** Sections for `text` (mrkdwn), split at 3,000 characters; `accessory` goes on the first. */
function sections(text: string, accessory?: SlackImageElement): Piece[] {
  return splitMrkdwn(text, MAX_SECTION_TEXT).map((chunk, index) => {
    const block: SlackSectionBlock = { type: "section", text: mrkdwn(chunk) };
    if (index === 0 && accessory !== undefined) block.accessory = accessory;
    return piece(block, chunk);
  });
}

/** Splits `items` into runs of at most `size`. */
function chunk<T>(items: readonly T[], size: number): T[][] {
  const count = Math.ceil(items.length / size);
  return Array.from({ length: count }, (_, n) => items.slice(n * size, (n + 1) * size));
}

/**
 * Actions blocks for `buttons` (25 to a block), followed by a context block repeating in full
 * any label that had to be cut to 75 characters, so that no label text is lost.
 */
function actions(buttons: readonly Button[] | undefined, state: RenderState): Piece[] {
  const pieces = chunk(buttons ?? [], MAX_ACTIONS_ELEMENTS).map((run) =>
    piece(
      {
        type: "actions",
        block_id: actionsBlockId(state.messageId, state.actionsBlocks++),
        elements: run.map((button) => ({
          type: "button",
          text: {
            type: "plain_text",
            text: truncatePlain(button.title, MAX_BUTTON_TEXT),
            emoji: true,
          },
          action_id: buttonActionId(state.buttons++),
          value: button.id,
        })),
      },
      run.map((button) => `• ${escapeMrkdwn(button.title)}`).join("\n"),
    )
  );
  const cut = (buttons ?? []).filter((button) => button.title.length > MAX_BUTTON_TEXT);
  for (const run of chunk(cut, MAX_CONTEXT_ELEMENTS)) {
    const elements = run.map((button) => mrkdwn(escapeMrkdwn(button.title)));
    pieces.push(piece({ type: "context", elements }));
  }
  return pieces;
}

/** A card: a section with the bold title, the subtitle and the image beside it, then buttons. */
function card(content: CardContent, state: RenderState): Piece[] {
  // Its own asterisks as look-alikes: one would end the bold early (`*5* Hotel*`).
  const title = `*${literalMarkers(escapeMrkdwn(content.title.trim().replace(/\s+/g, " ")))}*`;
  const subtitle = content.subtitle?.trim() ? `\n${textToMrkdwn(content.subtitle)}` : "";
  const image: SlackImageElement | undefined = content.image_url === undefined ? undefined : {
    type: "image",
    image_url: content.image_url,
    alt_text: truncatePlain(content.title, MAX_ALT_TEXT),
  };
  return [...sections(title + subtitle, image), ...actions(content.buttons, state)];
}

/** An image block, titled with its file's name, with its caption below it. */
function image(content: MediaContent): Piece[] {
  const filename = content.filename?.trim();
  const alt = content.caption?.trim() || filename || "image";
  const block: SlackImageBlock = {
    type: "image",
    image_url: content.url,
    alt_text: truncatePlain(alt, MAX_ALT_TEXT),
    ...(filename
      ? { title: { type: "plain_text", text: truncatePlain(filename, MAX_ALT_TEXT), emoji: true } }
      : {}),
  };
  const caption = content.caption?.trim() ? sections(textToMrkdwn(content.caption)) : [];
  return [piece(block, escapeMrkdwn(content.url)), ...caption];
}

/** A file: its name linked to its URL (or beside it, see `showLinkAddresses`), then the caption. */
function file(content: MediaContent, state: RenderState): Piece[] {
  const name = content.filename?.trim() || content.url;
  const caption = content.caption?.trim() ? `\n${textToMrkdwn(content.caption)}` : "";
  const link = state.showLinkAddresses && name !== content.url
    ? `${escapeMrkdwn(name)} (${mrkdwnLink(content.url)})`
    : mrkdwnLink(content.url, name);
  return sections(link + caption);
}

/**
 * The message as groups of pieces, each group (a card, a buttons message) kept in one Slack
 * message where it fits.
 */
function renderGroups(message: SlackMessageSource, state: RenderState): Piece[][] {
  const { message_type: type, content, payload } = message;
  const plain = (text: string) => sections(textToMrkdwn(text)).map((one) => [one]);
  switch (type) {
    case "text":
      return plain(content);
    case "markdown":
      return markdownToMrkdwn(content).flatMap((segment) =>
        segment.kind === "divider"
          ? [[piece({ type: "divider" })]]
          : sections(segment.text).map((one) => [one])
      );
    case "buttons": {
      const doc = BUTTONS_CONTENT.safeParse(payload);
      if (!doc.success) return plain(content);
      return [[...sections(textToMrkdwn(doc.data.text)), ...actions(doc.data.buttons, state)]];
    }
    case "card": {
      const doc = CARD_CONTENT.safeParse(payload);
      return doc.success ? [card(doc.data, state)] : plain(content);
    }
    case "carousel": {
      const doc = CAROUSEL_CONTENT.safeParse(payload);
      if (!doc.success) return plain(content);
      return doc.data.cards.map((one, index) => [
        ...(index === 0 ? [] : [piece({ type: "divider" })]),
        ...card(one, state),
      ]);
    }
    case "image":
    case "file": {
      const doc = MEDIA_CONTENT.safeParse(payload);
      // Not native (an http link of a development setup, say): as text, never as its JSON.
      if (!doc.success) return plain(plainTextOf(type, payload, content));
      return [type === "image" ? image(doc.data) : file(doc.data, state)];
    }
    case "template": {
      // The template's own wording is at Meta: its name and filled-in texts, and its quick
      // replies as buttons, so that an agent can drive a Flow waiting on them.
      const doc = TEMPLATE_CONTENT.safeParse(payload);
      if (!doc.success) return plain(content);
      return [[
        ...sections(textToMrkdwn(templateLines(doc.data).join("\n"))),
        ...actions(buttonsOffered("template", doc.data), state),
      ]];
    }
    default:
      return plain(plainTextOf(type, payload, content));
  }
}

/** The characters of text a block carries, as Slack counts them against a message. */
function textLength(block: SlackBlock): number {
  switch (block.type) {
    case "section":
      return block.text.text.length;
    case "actions":
      return block.elements.reduce((sum, one) => sum + one.text.text.length + one.value.length, 0);
    case "context":
      return block.elements.reduce((sum, one) => sum + one.text.length, 0);
    case "image":
      return block.alt_text.length;
    case "divider":
      return 0;
  }
}

/**
 * Packs groups into messages of at most 50 blocks and {@linkcode MAX_MESSAGE_TEXT} characters
 * (less `first` in the first message): a group that does not fit in the current message starts
 * the next one, and a group too big for any message is spread over several. A divider that
 * would open a message is left out.
 */
function packMessages(groups: readonly Piece[][], first: Reserve = NO_RESERVE): Piece[][] {
  const messages: Piece[][] = [];
  let current: Piece[] = [];
  let size = 0;
  const fits = (pieces: readonly Piece[]) => {
    const reserve = messages.length === 0 ? first : NO_RESERVE;
    return current.length + pieces.length <= MAX_BLOCKS - reserve.blocks &&
      size + pieces.reduce((sum, one) => sum + textLength(one.block), 0) <=
        MAX_MESSAGE_TEXT - reserve.text;
  };
  const flush = () => {
    if (current.length > 0) messages.push(current);
    current = [];
    size = 0;
  };
  for (const group of groups) {
    if (!fits(group)) flush();
    for (const one of group) {
      if (!fits([one])) flush();
      if (current.length === 0 && one.block.type === "divider") continue;
      current.push(one);
      size += textLength(one.block);
    }
  }
  flush();
  return messages;
}

/** The text of a post's pieces, whole. */
function wholeText(pieces: readonly Piece[]): string {
  return pieces.map((one) => one.fallback).filter((one) => one !== "").join("\n") || EMPTY_MESSAGE;
}

/**
 * Renders a message as one or more `chat.postMessage` bodies (more only when Slack's limits
 * force a split; post them in order). Never throws and never drops content: text too long for
 * a section is split across sections, blocks too many for one message across messages, and a
 * button label over 75 characters is cut with "…" and repeated in full in a context block.
 * Buttons carry `action_id` `parley_button:<index>`, `value` the button id, and sit in actions
 * blocks with `block_id` `parley_message:<message id>:<n>`.
 */
export function renderSlackMessage(
  message: SlackMessageSource,
  options: SlackRenderOptions = {},
): SlackMessage[] {
  return renderPieces(message, options).map((pieces) => ({
    text: truncateMrkdwn(wholeText(pieces), MAX_FALLBACK_TEXT),
    blocks: pieces.map((one) => one.block),
  }));
}

/**
 * The whole text of each post of {@linkcode renderSlackMessage} (its `text` is cut at 3,000
 * characters), for when Slack refuses a post's blocks: then the post goes as this text alone,
 * which stays within Slack's 40,000 as a post carries at most 10,000 characters of blocks.
 */
export function renderSlackPlainText(
  message: SlackMessageSource,
  options: SlackRenderOptions = {},
): string[] {
  return renderPieces(message, options).map(wholeText);
}

/** The pieces of each post of a message. */
function renderPieces(message: SlackMessageSource, options: SlackRenderOptions): Piece[][] {
  const state: RenderState = {
    messageId: message.id,
    buttons: 0,
    actionsBlocks: 0,
    showLinkAddresses: options.showLinkAddresses ?? false,
  };
  const lead = options.lead === undefined ? undefined : truncateMrkdwn(
    options.lead,
    MAX_REPLY_CONTEXT,
  );
  const reserve = lead === undefined ? NO_RESERVE : { blocks: 1, text: MAX_REPLY_CONTEXT };
  const messages = packMessages(renderGroups(message, state), reserve);
  // Content that renders to nothing (Markdown that is only a rule, say) is shown as written.
  if (messages.length === 0 && message.content.trim() !== "") {
    messages.push(sections(escapeMrkdwn(message.content)));
  }
  if (messages.length === 0) messages.push(sections(`_${EMPTY_MESSAGE}_`));
  if (lead !== undefined) {
    messages[0].unshift(piece({ type: "context", elements: [mrkdwn(lead)] }, lead));
  }
  return messages;
}

/**
 * The post that follows a message a channel did not deliver (a Flow's step outside WhatsApp's
 * window, a send refused for good): small print with the reason, so that the thread does not
 * pass the message off as seen by the customer.
 */
export function renderNotDelivered(reason: string): SlackMessage {
  const text = `:warning: Not delivered: ${escapeMrkdwn(reason)}`;
  return {
    text,
    blocks: [{ type: "context", elements: [{ type: "mrkdwn", text, verbatim: true }] }],
  };
}
