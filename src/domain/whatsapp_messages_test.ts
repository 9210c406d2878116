import assert from "node:assert/strict";
import fc from "fast-check";
import { assertGolden } from "../../tests/support/golden.ts";
import { type MessageType, parseMessageContent } from "./message_kinds.ts";
import { plainTextOf } from "./plain_text.ts";
import { toWhatsAppFormatting } from "./whatsapp_formatting.ts";
import {
  buttonIdOfReply,
  renderWhatsAppMessages,
  type WhatsAppMessage,
} from "./whatsapp_messages.ts";

// The Cloud API's documented limits, written out again here (not imported) so that a wrong
// constant in the code cannot make its own test pass. Sources: Meta's "text-messages",
// "image-messages", "document-messages", "interactive-reply-buttons-messages" and
// "interactive-list-messages" developer documentation pages.
const TEXT_BODY = 4096;
const CAPTION = 1024;
const REPLY_BUTTONS = 3;
const REPLY_BODY = 1024;
const REPLY_TITLE = 20;
const REPLY_ID = 256;
const LIST_BODY = 4096;
const LIST_BUTTON = 20;
const LIST_ROWS = 10;
const SECTION_TITLE = 24;
const ROW_TITLE = 24;
const ROW_DESCRIPTION = 72;
const ROW_ID = 200;

type Rendered = { message_type: MessageType; content: string; payload: unknown };

/** A Parley message as stored: `document` validated by `parseMessageContent`. */
function parley(type: MessageType, document: unknown): Rendered {
  const content = typeof document === "string" ? document : JSON.stringify(document);
  return { message_type: type, content, payload: parseMessageContent(type, content).payload };
}

/** Asserts that `text` is not blank, is well-formed UTF-16 and has at most `max` code units. */
function assertFits(text: string, max: number, what: string): void {
  assert.ok(/\S/.test(text), `${what} is blank`);
  assert.ok(text.isWellFormed(), `${what} has a broken surrogate pair`);
  assert.ok(text.length <= max, `${what} has ${text.length} characters, over ${max}`);
}

/** The reply ids a rendering offers (reply buttons and list rows), in order. */
function replyIds(messages: WhatsAppMessage[]): string[] {
  return messages.flatMap((message) => {
    if (message.type !== "interactive") return [];
    const { interactive } = message;
    return interactive.type === "button"
      ? interactive.action.buttons.map((button) => button.reply.id)
      : interactive.action.sections.flatMap((section) => section.rows.map((row) => row.id));
  });
}

/** Asserts every documented Cloud API limit on every message of a rendering. */
function assertWithinLimits(messages: WhatsAppMessage[]): void {
  for (const message of messages) {
    if (message.type === "text") assertFits(message.text.body, TEXT_BODY, "text body");
    if (message.type === "image" && message.image.caption !== undefined) {
      assertFits(message.image.caption, CAPTION, "image caption");
    }
    if (message.type === "document" && message.document.caption !== undefined) {
      assertFits(message.document.caption, CAPTION, "document caption");
    }
    if (message.type !== "interactive") continue;
    const { interactive } = message;
    if (interactive.type === "button") {
      assertFits(interactive.body.text, REPLY_BODY, "reply-buttons body");
      const { buttons } = interactive.action;
      assert.ok(buttons.length >= 1 && buttons.length <= REPLY_BUTTONS, "1 to 3 reply buttons");
      for (const { reply } of buttons) {
        assertFits(reply.title, REPLY_TITLE, "button title");
        assertFits(reply.id, REPLY_ID, "button id");
        assert.equal(reply.id, reply.id.trim(), "button id has outer whitespace");
      }
      const titles = buttons.map((button) => button.reply.title);
      assert.equal(new Set(titles).size, titles.length, "button titles are not unique");
    } else {
      assertFits(interactive.body.text, LIST_BODY, "list body");
      assertFits(interactive.action.button, LIST_BUTTON, "list button label");
      const rows = interactive.action.sections.flatMap((section) => {
        assertFits(section.title, SECTION_TITLE, "section title");
        return section.rows;
      });
      assert.ok(rows.length >= 1 && rows.length <= LIST_ROWS, "1 to 10 list rows");
      for (const row of rows) {
        assertFits(row.title, ROW_TITLE, "row title");
        assertFits(row.id, ROW_ID, "row id");
        if (row.description !== undefined) {
          assertFits(row.description, ROW_DESCRIPTION, "row description");
        }
      }
    }
  }
  const ids = replyIds(messages);
  assert.equal(new Set(ids).size, ids.length, "reply ids are not unique within the message");
}

/**
 * The words (runs of letters and digits) of a message's input text, fence info strings aside (a
 * template's plain-text heading too: it goes as itself).
 */
function inputWords(message: Rendered): string[] {
  const text = plainTextOf(message.message_type, message.payload, message.content)
    .replace(/^\s*(```|~~~).*$/gm, "")
    .replace(/^Template /, "");
  return text.split(/[^\p{L}\p{N}]+/u).filter((word) => word !== "");
}

/** Asserts that every word of the input appears somewhere in the output (nothing dropped). */
function assertNothingLost(message: Rendered, messages: WhatsAppMessage[]): void {
  const output = JSON.stringify(messages);
  for (const word of inputWords(message)) {
    assert.ok(output.includes(word), `"${word}" is missing from the output`);
  }
}

/** Renders `message` and checks the limits and that nothing was dropped. */
function render(message: Rendered): WhatsAppMessage[] {
  const messages = renderWhatsAppMessages(message);
  assertWithinLimits(messages);
  assertNothingLost(message, messages);
  return messages;
}

/** `n` buttons with distinct ids. */
function buttons(n: number, title = (i: number) => `Option ${i + 1}`) {
  return Array.from({ length: n }, (_, i) => ({ id: `opt_${i + 1}`, title: title(i) }));
}

/** Text of exactly `length` characters made of 5-letter words, not ending in a space. */
function words(length: number): string {
  const all = Array.from(
    { length: Math.ceil(length / 6) },
    (_, i) => `w${String(i).padStart(4, "0")}`,
  );
  const text = all.join(" ").slice(0, length);
  return text.endsWith(" ") ? `${text.slice(0, -1)}x` : text;
}

const MARKDOWN = [
  "# Order update",
  "",
  "Your order is **confirmed** and *on its way*. Track it _here_ or read ~~nothing~~ **_more_**.",
  "***Important:*** keep `ORDER-42` and see [the help centre](https://example.com/help).",
  "Raw links stay: https://example.com/a_b*c*d and <https://example.com/auto>.",
  "![Parcel photo](https://example.com/parcel.png) and an escaped \\*star\\*.",
  "\\# not a heading, 1\\. not a list",
  "",
  "## What happens next",
  "- Packing",
  "* Shipping",
  "  + Tracking **number** sent",
  "1. Delivery",
  "2) Signature",
  "> Thanks for shopping with us",
  "",
  "---",
  "```typescript",
  "const total = price * quantity; // **not bold**",
  "```",
].join("\n");

const CARD = {
  title: "Aloe Vera",
  subtitle: "Easy to care for, loves bright light. 12 cm pot.",
  image_url: "https://example.com/aloe.jpg",
};

/** One golden case per message kind: name → message. */
const GOLDEN_CASES: Record<string, Rendered> = {
  text: parley(
    "text",
    "Hi Pablo! Your workshop is at 9am tomorrow.\nReply if you need to reschedule.",
  ),
  markdown: parley("markdown", MARKDOWN),
  buttons_1: parley("buttons", { text: "Did that answer your question?", buttons: buttons(1) }),
  buttons_3: parley("buttons", {
    text: "How can we help?",
    buttons: [
      { id: "sales", title: "Sales" },
      { id: "help", title: "Support" },
      { id: "billing", title: "Billing and invoices questions" },
    ],
  }),
  buttons_4: parley("buttons", {
    text: "Pick a delivery slot",
    buttons: buttons(4, (i) => [`Today`, `Tomorrow morning, 8–12 o'clock`, `Tomorrow`, `Later`][i]),
  }),
  buttons_10: parley("buttons", {
    text: "Which plant are you interested in?",
    buttons: buttons(10),
  }),
  card_image_2_buttons: parley("card", {
    ...CARD,
    buttons: [
      { id: "buy_aloe", title: "Buy now" },
      { id: "info_aloe", title: "More information please" },
    ],
  }),
  card_5_buttons: parley("card", { ...CARD, buttons: buttons(5) }),
  card_without_buttons: parley("card", CARD),
  card_without_buttons_or_image: parley("card", {
    title: "Opening hours",
    subtitle: "Mon–Fri 9–17",
  }),
  carousel_3_cards: parley("carousel", {
    cards: [
      { ...CARD, buttons: [{ id: "buy_aloe", title: "Buy" }] },
      {
        title: "Echeveria",
        subtitle: "Rosette succulent.",
        buttons: buttons(4).map((b) => ({ ...b, id: `e_${b.id}` })),
      },
      { title: "Cactus", image_url: "https://example.com/cactus.jpg" },
    ],
  }),
  form: parley("form", {
    title: "Book a visit",
    fields: [
      { name: "name", label: "Your name", type: "text" },
      { name: "email", label: "Email", type: "email" },
    ],
  }),
  image: parley("image", {
    url: "https://example.com/succulent.png",
    caption: "The best succulent ever?",
  }),
  image_without_caption: parley("image", {
    url: "https://example.com/storefront.jpg",
    filename: "storefront.jpg",
  }),
  file: parley("file", {
    url: "https://example.com/invoice.pdf",
    caption: "Your invoice",
    filename: "lucky-shrub-invoice.pdf",
  }),
  template: parley("template", {
    name: "order_confirmation",
    language: "en_US",
    components: [{ type: "body", parameters: [{ type: "text", text: "Pablo" }] }],
  }),
  invalid_payload: {
    message_type: "buttons",
    content: '{"text":"Choose one","buttons":[]}',
    payload: { text: "Choose one", buttons: [] },
  },
};

for (const [name, message] of Object.entries(GOLDEN_CASES)) {
  Deno.test(`renderWhatsAppMessages() renders ${name} as testdata/whatsapp_messages/${name}.json`, async () => {
    const url = new URL(`testdata/whatsapp_messages/${name}.json`, import.meta.url);
    await assertGolden(url, render(message));
  });
}

/** The bodies of the text messages of a rendering. */
function textBodies(messages: WhatsAppMessage[]): string[] {
  return messages.map((message) => {
    assert.equal(message.type, "text");
    return message.type === "text" ? message.text.body : "";
  });
}

/** The interactive object of the last message of a rendering. */
function lastInteractive(messages: WhatsAppMessage[]) {
  const last = messages.at(-1);
  assert.equal(last?.type, "interactive");
  return last?.type === "interactive" ? last.interactive : assert.fail("no interactive message");
}

Deno.test("renderWhatsAppMessages() sends a text of 4096 characters as one message", () => {
  const text = words(4096);
  assert.deepEqual(textBodies(render(parley("text", text))), [text]);
});

Deno.test("renderWhatsAppMessages() splits a text of 4097 characters at a word boundary", () => {
  const text = words(4097);
  const bodies = textBodies(render(parley("text", text)));
  assert.equal(bodies.length, 2);
  assert.equal(bodies.join(" "), text);
});

Deno.test("renderWhatsAppMessages() splits a text of 10000 characters into 3 messages, words whole", () => {
  const text = words(10_000);
  const bodies = textBodies(render(parley("text", text)));
  assert.equal(bodies.length, 3);
  assert.equal(bodies.join(" "), text);
});

Deno.test("renderWhatsAppMessages() splits a text without spaces between graphemes", () => {
  const text = "😀".repeat(5_000);
  const bodies = textBodies(render(parley("text", text)));
  assert.deepEqual(bodies.map((body) => body.length), [4096, 4096, 1808]);
  assert.equal(bodies.join(""), text);
});

Deno.test("renderWhatsAppMessages() prefers line breaks when splitting", () => {
  const line = words(99);
  const text = Array.from({ length: 50 }, () => line).join("\n");
  const bodies = textBodies(render(parley("text", text)));
  assert.equal(bodies.join("\n"), text);
  assert.ok(bodies.every((body) => body.split("\n").every((part) => part === line)));
});

Deno.test("renderWhatsAppMessages() closes and reopens a code block split across messages", () => {
  const code = Array.from({ length: 200 }, (_, i) => `line ${i} ${words(40)}`).join("\n");
  const bodies = textBodies(render(parley("markdown", `Intro\n\n\`\`\`\n${code}\n\`\`\``)));
  assert.ok(bodies.length > 1);
  for (const body of bodies) assert.equal(body.split("```").length % 2, 1, "unbalanced fences");
  assert.ok(bodies.slice(1).every((body) => body.startsWith("```\n")));
});

Deno.test("renderWhatsAppMessages() gives a blank text no message", () => {
  assert.deepEqual(
    renderWhatsAppMessages({ message_type: "text", content: " \n ", payload: null }),
    [],
  );
});

Deno.test("renderWhatsAppMessages() keeps a button title of 20 characters and cuts one of 21 with …", () => {
  const title20 = "Reschedule my visit!";
  const title21 = "Reschedule my visits!";
  const keep = lastInteractive(
    render(parley("buttons", { text: "Hi", buttons: [{ id: "a", title: title20 }] })),
  );
  assert.ok(keep.type === "button");
  assert.equal(keep.action.buttons[0].reply.title, title20);
  assert.equal(keep.body.text, "Hi");
  const cut = lastInteractive(
    render(parley("buttons", { text: "Hi", buttons: [{ id: "a", title: title21 }] })),
  );
  assert.ok(cut.type === "button");
  assert.equal(cut.action.buttons[0].reply.title, "Reschedule my visit…");
  assert.equal(cut.body.text, `Hi\n\n• ${title21}`);
});

Deno.test("renderWhatsAppMessages() makes repeated reply-button titles unique", () => {
  const interactive = lastInteractive(render(parley("buttons", {
    text: "Sure?",
    buttons: [{ id: "a", title: "Yes" }, { id: "b", title: "Yes" }, {
      id: "c",
      title: "x".repeat(30),
    }],
  })));
  assert.ok(interactive.type === "button");
  assert.deepEqual(interactive.action.buttons.map((b) => b.reply.title), [
    "Yes",
    "Yes (2)",
    `${"x".repeat(19)}…`,
  ]);
});

Deno.test("renderWhatsAppMessages() keeps a row title of 24 characters and cuts one of 25 into the description", () => {
  const title24 = "Tomorrow between 8 and 9";
  const title25 = "Tomorrow between 8 and 10";
  const list = lastInteractive(render(parley("buttons", {
    text: "When?",
    buttons: [title24, title25, "x".repeat(100), "Later"].map((title, i) => ({
      id: `s${i}`,
      title,
    })),
  })));
  assert.ok(list.type === "list");
  const [keep, cut, long] = list.action.sections[0].rows;
  assert.deepEqual(keep, { id: "s0", title: title24 });
  assert.deepEqual(cut, { id: "s1", title: "Tomorrow between 8 and…", description: title25 });
  assert.equal(long.description, `${"x".repeat(71)}…`);
  assert.equal(list.body.text, `When?\n\n• ${"x".repeat(100)}`);
});

Deno.test("renderWhatsAppMessages() keeps a reply body of 1024 characters and moves the start of 1025 to a text", () => {
  const button = [{ id: "ok", title: "OK" }];
  const fits = render(parley("buttons", { text: words(1024), buttons: button }));
  assert.equal(fits.length, 1);
  const fitting = lastInteractive(fits);
  assert.equal(fitting.body.text, words(1024));
  const over = render(parley("buttons", { text: words(1025), buttons: button }));
  assert.equal(over.length, 2);
  const [head] = textBodies(over.slice(0, 1));
  assert.equal(`${head} ${lastInteractive(over).body.text}`, words(1025));
});

Deno.test("renderWhatsAppMessages() keeps a list body of 4096 characters and moves the start of 4097 to a text", () => {
  // A card's list body is "*T*\n" and the subtitle: 4 + 4092 = 4096 characters, then 4097.
  const fits = render(parley("card", { title: "T", subtitle: words(4092), buttons: buttons(4) }));
  assert.equal(fits.length, 1);
  assert.equal(lastInteractive(fits).body.text, `*T*\n${words(4092)}`);
  const over = render(parley("card", { title: "T", subtitle: words(4093), buttons: buttons(4) }));
  assert.deepEqual(textBodies(over.slice(0, 1)), ["*T*"]);
  assert.equal(lastInteractive(over).type, "list");
  assert.equal(lastInteractive(over).body.text, words(4093));
});

Deno.test("renderWhatsAppMessages() splits a caption over 1024 characters into following text", () => {
  const caption = words(3000);
  const messages = render(parley("image", { url: "https://example.com/a.png", caption }));
  assert.deepEqual(messages.map((m) => m.type), ["image", "text"]);
  const [image, text] = messages;
  assert.ok(image.type === "image" && text.type === "text");
  assert.equal(`${image.image.caption} ${text.text.body}`, caption);
});

Deno.test("renderWhatsAppMessages() sends media stored with an http link as its caption and link, not its JSON", () => {
  // Parley's own links to received files are http under an http PUBLIC_BASE_URL.
  const payload = {
    url: "http://localhost:8080/api/v1/slack/media/F1?exp=1&sig=a",
    caption: "my pic",
  };
  for (const type of ["image", "file"] as const) {
    const messages = renderWhatsAppMessages({
      message_type: type,
      content: JSON.stringify(payload),
      payload,
    });
    assert.deepEqual(messages, [{
      type: "text",
      text: { body: `my pic\n${payload.url}` },
    }]);
  }
});

Deno.test("renderWhatsAppMessages() and buttonIdOfReply() route ids of 200, 201 and 256 characters", () => {
  const ids = [200, 201, 256].map((n, i) => String(i).repeat(n));
  const asButtons = ids.map((id, i) => ({ id, title: `B${i}` }));
  // As reply buttons (≤ 256): every id is sent as it is.
  const reply = parley("buttons", { text: "Pick", buttons: asButtons });
  assert.deepEqual(replyIds(render(reply)), ids);
  // As list rows (≤ 200): the longer ones are sent by index.
  const list = parley("buttons", {
    text: "Pick",
    buttons: [...asButtons, { id: "last", title: "B3" }],
  });
  assert.deepEqual(replyIds(render(list)), [ids[0], "parley_button:1", "parley_button:2", "last"]);
  for (const message of [reply, list]) {
    for (const [index, replyId] of replyIds(renderWhatsAppMessages(message)).entries()) {
      assert.equal(
        buttonIdOfReply(message.message_type, message.payload, replyId),
        [...ids, "last"][index],
      );
    }
  }
});

Deno.test("buttonIdOfReply() counts the index across a carousel's cards", () => {
  const message = parley("carousel", {
    cards: [
      { title: "A", buttons: [{ id: "a1", title: "One" }, { id: "a2", title: "Two" }] },
      {
        title: "B",
        buttons: [{ id: " padded", title: "Three" }, { id: "parley_button:0", title: "Four" }],
      },
    ],
  });
  assert.deepEqual(replyIds(render(message)), ["a1", "a2", "parley_button:2", "parley_button:3"]);
  assert.equal(buttonIdOfReply("carousel", message.payload, "parley_button:2"), " padded");
  assert.equal(buttonIdOfReply("carousel", message.payload, "parley_button:3"), "parley_button:0");
  assert.equal(buttonIdOfReply("carousel", message.payload, "parley_button:0"), null);
});

Deno.test("buttonIdOfReply() returns null when the message offers no such button", () => {
  const message = parley("buttons", { text: "Pick", buttons: buttons(2) });
  assert.equal(buttonIdOfReply("buttons", message.payload, "opt_1"), "opt_1");
  assert.equal(buttonIdOfReply("buttons", message.payload, "opt_9"), null);
  assert.equal(buttonIdOfReply("buttons", { text: "broken" }, "opt_1"), null);
  assert.equal(buttonIdOfReply("text", null, "opt_1"), null);
});

/** Lowercase words of 1 to 12 letters and digits. */
const WORD = fc.stringMatching(/^[a-z0-9]{1,12}$/);
/** Text of such words, joined by spaces and line breaks. */
const TEXT = (maxWords: number) =>
  fc.array(fc.tuple(WORD, fc.constantFrom(" ", " ", "\n")), { minLength: 1, maxLength: maxWords })
    .map((parts) => parts.flat().join("").trim());
/** A title of such words, at most 256 characters. */
const TITLE = TEXT(40).map((text) => text.slice(0, 256).trim()).filter((text) => text !== "");
/** Button ids: short, long, padded, or in the fallback form. */
const ID = fc.oneof(
  WORD,
  fc.integer({ min: 190, max: 256 }).map((n) => "i".repeat(n)),
  WORD.map((word) => ` ${word}`),
  fc.nat(12).map((n) => `parley_button:${n}`),
);
const BUTTONS = (max: number) =>
  fc.uniqueArray(fc.record({ id: ID, title: TITLE }), { maxLength: max, selector: (b) => b.id });
const CARD_ARB = fc.record({
  title: TITLE,
  subtitle: fc.option(TEXT(700).map((text) => text.slice(0, 4096)), { nil: undefined }),
  image_url: fc.option(fc.constant("https://example.com/p.jpg"), { nil: undefined }),
  buttons: BUTTONS(5),
});

/** Renders a valid message, checks limits and words, and that every reply id maps back. */
function checkRendering(type: MessageType, document: unknown, allButtons: { id: string }[]): void {
  const message = parley(type, document);
  const ids = replyIds(render(message));
  assert.equal(ids.length, allButtons.length);
  ids.forEach((replyId, index) => {
    assert.equal(buttonIdOfReply(type, message.payload, replyId), allButtons[index].id);
  });
}

Deno.test("renderWhatsAppMessages() keeps every buttons message within limits, words and routes", () => {
  fc.assert(
    fc.property(
      TEXT(800).map((text) => text.slice(0, 4096).trim()),
      BUTTONS(10),
      (text, buttons) => {
        fc.pre(text !== "" && buttons.length >= 1);
        checkRendering("buttons", { text, buttons }, buttons);
      },
    ),
    { numRuns: 150 },
  );
});

Deno.test("renderWhatsAppMessages() keeps every card and carousel within limits, words and routes", () => {
  fc.assert(
    fc.property(fc.array(CARD_ARB, { minLength: 1, maxLength: 10 }), (cards) => {
      const all = cards.flatMap((card) => card.buttons);
      fc.pre(new Set(all.map((b) => b.id)).size === all.length);
      checkRendering("card", cards[0], cards[0].buttons);
      checkRendering("carousel", { cards }, all);
    }),
    { numRuns: 100 },
  );
});

Deno.test("renderWhatsAppMessages() keeps every text and markdown within limits and words", () => {
  const MARKUP = fc.constantFrom(["", ""], ["**", "**"], ["_", "_"], ["~~", "~~"], ["`", "`"], [
    "# ",
    "",
  ], ["- ", ""]);
  fc.assert(
    fc.property(fc.array(fc.tuple(TEXT(30), MARKUP), { maxLength: 60 }), (parts) => {
      const text = parts.map(([t]) => t).join("\n").slice(0, 10_000);
      const markdown = parts.map(([t, [open, close]]) => `${open}${t}${close}`).join("\n").slice(
        0,
        10_000,
      );
      fc.pre(/\S/.test(text) && /\S/.test(markdown));
      render(parley("text", text));
      render(parley("markdown", markdown));
    }),
    { numRuns: 100 },
  );
});

Deno.test("renderWhatsAppMessages sends Markdown with an empty heading as written, not as **", () => {
  const render = (content: string) =>
    renderWhatsAppMessages({ message_type: "markdown", content, payload: null });
  assert.deepEqual(render("# "), [{ type: "text", text: { body: "#" } }]);
  assert.deepEqual(render("# Title\n#\n\nbody"), [{
    type: "text",
    text: { body: "*Title*\n#\n\nbody" },
  }]);
});

Deno.test("toWhatsAppFormatting() keeps a link destination holding balanced parentheses whole", () => {
  assert.equal(
    toWhatsAppFormatting("See [Mercury](https://en.wikipedia.org/wiki/Mercury_(planet)) now."),
    "See Mercury (https://en.wikipedia.org/wiki/Mercury_(planet)) now.",
  );
});

Deno.test("toWhatsAppFormatting() takes underscores inside a word as text, and a card title holding asterisks stays bold whole", () => {
  assert.equal(
    toWhatsAppFormatting("my__var__name and my_var_name"),
    "my__var__name and my_var_name",
  );
  assert.equal(toWhatsAppFormatting("(__bold__) _it_ ***both***"), "(*bold*) _it_ *_both_*");
  assert.equal(toWhatsAppFormatting("*Note: **important** read*"), "_Note: *important* read_");
  const payload = { title: "5* Hotel", subtitle: "rated 4.5*" };
  const [message] = renderWhatsAppMessages({
    message_type: "card",
    content: JSON.stringify(payload),
    payload,
  });
  assert.deepEqual(message, { type: "text", text: { body: "*5\u2217 Hotel*\nrated 4.5*" } });
});
