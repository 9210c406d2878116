import assert from "node:assert/strict";
import fc from "fast-check";
import { assertGolden } from "../../tests/support/golden.ts";
import { type MessageType, parseMessageContent } from "./message_kinds.ts";
import {
  actionsBlockId,
  buttonActionId,
  parseSlackAction,
  renderSlackMessage,
  renderSlackPlainText,
  type SlackBlock,
  type SlackMessage,
  type SlackMessageSource,
} from "./slack_blocks.ts";

/** A stored message as the API would store it (content validated into its payload). */
function message(type: MessageType, content: string | object, id = 42): SlackMessageSource {
  const text = typeof content === "string" ? content : JSON.stringify(content);
  return {
    id,
    message_type: type,
    content: text,
    payload: parseMessageContent(type, text).payload,
  };
}

/** Renders `source` and compares it with `testdata/slack_blocks/<name>.json`. */
async function assertRendersAs(name: string, source: SlackMessageSource): Promise<SlackMessage[]> {
  const rendered = renderSlackMessage(source);
  assertWithinLimits(rendered);
  await assertGolden(new URL(`testdata/slack_blocks/${name}.json`, import.meta.url), rendered);
  return rendered;
}

/** Space-separated numbered words, exactly `length` characters long. */
function words(length: number, lineLength = Infinity): string {
  let text = "";
  for (let n = 1; text.length < length; n++) {
    text += `word${n}${n % lineLength === 0 ? "\n" : " "}`;
  }
  return text.slice(0, length - 1) + "x";
}

/** A link as the renderer writes it: `<http(s) or mailto URL>` or `<url|label>`. */
const LINK = /<(?:https?:\/\/|mailto:)[^\s<>|]+(?:\|[^<>]*)?>/g;

/** The mrkdwn texts of a rendering (sections, context elements, fallback texts). */
function mrkdwnTexts(messages: SlackMessage[]): string[] {
  return messages.flatMap((one) => [
    one.text,
    ...one.blocks.flatMap((block) =>
      block.type === "section"
        ? [block.text.text]
        : block.type === "context"
        ? block.elements.map((element) => element.text)
        : []
    ),
  ]);
}

/** Asserts every Block Kit limit and the escaping rules on a rendering. */
function assertWithinLimits(messages: SlackMessage[]): void {
  assert.ok(messages.length >= 1, "at least one message");
  const blockIds = new Set<string>();
  const actionIds = new Set<string>();
  for (const { text, blocks } of messages) {
    assert.ok(text.trim().length >= 1 && text.length <= 3000, "fallback text length");
    assert.ok(blocks.length >= 1 && blocks.length <= 50, `${blocks.length} blocks`);
    assert.notEqual(blocks[0].type, "divider");
    assert.ok(blocks.reduce((sum, block) => sum + textLength(block), 0) <= 10_000);
    for (const block of blocks) {
      if (block.type === "section") {
        assert.ok(block.text.text.trim().length >= 1, "section text is not blank");
        assert.ok(block.text.text.length <= 3000, `section of ${block.text.text.length}`);
      } else if (block.type === "actions") {
        assert.ok(block.elements.length >= 1 && block.elements.length <= 25);
        assert.ok(block.block_id.length <= 255 && !blockIds.has(block.block_id));
        blockIds.add(block.block_id);
        for (const button of block.elements) {
          assert.ok(button.text.text.length >= 1 && button.text.text.length <= 75);
          assert.ok(button.value.length >= 1 && button.value.length <= 2000);
          assert.ok(button.action_id.length <= 255 && !actionIds.has(button.action_id));
          actionIds.add(button.action_id);
        }
      } else if (block.type === "image") {
        assert.ok(block.alt_text.length >= 1 && block.alt_text.length <= 2000);
      } else if (block.type === "context") {
        assert.ok(block.elements.length >= 1 && block.elements.length <= 10);
      }
    }
  }
  for (const text of mrkdwnTexts(messages)) {
    const outsideLinks = text.replace(LINK, "");
    assert.doesNotMatch(outsideLinks, /[<>]/, `raw < or > outside a link in ${text}`);
    assert.doesNotMatch(text, /&(?!amp;|lt;|gt;)/, `unescaped & in ${text}`);
  }
}

/** Characters of text in a block, as the renderer budgets them. */
function textLength(block: SlackBlock): number {
  if (block.type === "section") return block.text.text.length;
  if (block.type === "context") return block.elements.reduce((n, e) => n + e.text.length, 0);
  if (block.type === "image") return block.alt_text.length;
  if (block.type === "actions") {
    return block.elements.reduce((n, e) => n + e.text.text.length + e.value.length, 0);
  }
  return 0;
}

/** The letters and digits of everything visible in a rendering, entities decoded. */
function visibleLetters(messages: SlackMessage[]): string {
  const texts = messages.flatMap((one) =>
    one.blocks.flatMap((block) =>
      block.type === "section"
        ? [block.text.text]
        : block.type === "context"
        ? block.elements.map((element) => element.text)
        : block.type === "actions"
        ? block.elements.map((button) => button.text.text)
        : []
    )
  );
  return texts.join("")
    .replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&")
    .replace(/[^\p{L}\p{N}]/gu, "");
}

/** Asserts that every word (run of letters and digits) of `input` is visible in `messages`. */
function assertNoWordLost(input: string, messages: SlackMessage[]): void {
  const visible = visibleLetters(messages);
  for (const word of input.match(/[\p{L}\p{N}]+/gu) ?? []) {
    assert.ok(visible.includes(word), `lost ${JSON.stringify(word)}`);
  }
}

Deno.test("renderSlackMessage() renders text as one escaped mrkdwn section with its URLs linked", async () => {
  const text = "Hello *there* & welcome!\nSee https://parley.example/help?a=1&b=2. Thanks";
  const [rendered] = await assertRendersAs("text", message("text", text));
  assert.equal(rendered.blocks.length, 1);
});

Deno.test("renderSlackMessage() converts every markdown construct to mrkdwn", async () => {
  const markdown = [
    "# Welcome to **Parley**",
    "Some **bold**, __also bold__, *italic*, _italic too_, ~~struck~~ and `a < b && c`.",
    "A [link](https://parley.example/docs?x=1&y=2), an ![image](https://parley.example/i.png),",
    "a bare https://parley.example/page. and snake_case_name stay as they are.",
    "",
    "## Lists",
    "- dash item",
    "* star item",
    "+ plus item",
    "  - nested item",
    "1. first",
    "2) second",
    "> a quote",
    "",
    "---",
    "```ts",
    "const ok = 1 < 2 && 3 > 2; // **not bold**",
    "```",
    "Trailing text.",
  ].join("\n");
  await assertRendersAs("markdown", message("markdown", markdown));
});

Deno.test("renderSlackMessage() renders buttons as a section and an actions block", async () => {
  await assertRendersAs(
    "buttons",
    message("buttons", {
      text: "Hi! What do you need?",
      buttons: [{ id: "sales", title: "Sales" }, { id: "help", title: "Support" }],
    }),
  );
});

Deno.test("renderSlackMessage() renders a card with its image beside the text and buttons below", async () => {
  await assertRendersAs(
    "card_with_image_and_buttons",
    message("card", {
      title: "Parley Pro",
      subtitle: "Everything in Basic, plus <routing> & reports.\nFrom $20 a month.",
      image_url: "https://parley.example/pro.png",
      buttons: [{ id: "buy_pro", title: "Buy" }, { id: "details_pro", title: "Details" }],
    }),
  );
});

Deno.test("renderSlackMessage() renders a card without image or buttons as one section", async () => {
  const [rendered] = await assertRendersAs(
    "card_without_image_or_buttons",
    message("card", { title: "Parley Basic" }),
  );
  assert.deepEqual(rendered.blocks.map((block) => block.type), ["section"]);
});

/** A carousel document of `count` cards, two buttons each. */
function carousel(count: number): object {
  return {
    cards: Array.from({ length: count }, (_, index) => ({
      title: `Plan ${index + 1}`,
      subtitle: `Plan number ${index + 1}`,
      image_url: `https://parley.example/plan-${index + 1}.png`,
      buttons: [
        { id: `buy_${index + 1}`, title: "Buy" },
        { id: `info_${index + 1}`, title: "Info" },
      ],
    })),
  };
}

Deno.test("renderSlackMessage() renders a carousel of 3 as cards between dividers", async () => {
  const [rendered] = await assertRendersAs("carousel_3", message("carousel", carousel(3)));
  assert.deepEqual(rendered.blocks.map((block) => block.type), [
    "section",
    "actions",
    "divider",
    "section",
    "actions",
    "divider",
    "section",
    "actions",
  ]);
});

Deno.test("renderSlackMessage() numbers a carousel of 10's buttons across all cards", async () => {
  const rendered = await assertRendersAs("carousel_10", message("carousel", carousel(10), 7));
  assert.equal(rendered.length, 1);
  const actions = rendered[0].blocks.filter((block) => block.type === "actions");
  assert.deepEqual(
    actions.map((block) => block.block_id),
    [...Array(10).keys()].map((n) => actionsBlockId(7, n)),
  );
  const buttons = actions.flatMap((block) => block.elements);
  assert.deepEqual(
    buttons.map((button) => button.action_id),
    [...Array(20).keys()].map(buttonActionId),
  );
});

Deno.test("renderSlackMessage() renders a form as plain text", async () => {
  await assertRendersAs(
    "form",
    message("form", {
      title: "Contact details",
      fields: [
        { name: "email", label: "Email", type: "email" },
        { name: "age", label: "Age <years>", type: "number" },
      ],
    }),
  );
});

Deno.test("renderSlackMessage() renders an image as an image block and its caption", async () => {
  await assertRendersAs(
    "image",
    message("image", { url: "https://parley.example/shot.png", caption: "Our *new* office" }),
  );
  const [bare] = renderSlackMessage(
    message("image", { url: "https://parley.example/a.png", filename: "a.png" }),
  );
  // Its name shows above it (the title), as WhatsApp shows it as the caption.
  assert.deepEqual(bare.blocks, [{
    type: "image",
    image_url: "https://parley.example/a.png",
    alt_text: "a.png",
    title: { type: "plain_text", text: "a.png", emoji: true },
  }]);
  const [unnamed] = renderSlackMessage(message("image", { url: "https://parley.example/b.png" }));
  assert.equal(unnamed.blocks[0].type === "image" && unnamed.blocks[0].alt_text, "image");
});

Deno.test("renderSlackMessage() renders a file as its escaped name linked to its escaped URL", async () => {
  await assertRendersAs(
    "file",
    message("file", {
      url: "https://files.parley.example/a|b.pdf?x=1&y=2",
      filename: "Q3 <report> & notes.pdf",
      caption: "The numbers",
    }),
  );
});

Deno.test("renderSlackMessage() shows media stored with an http link as its caption and link, not its JSON", () => {
  // Parley's own links to received files are http under an http PUBLIC_BASE_URL.
  const payload = {
    url: "http://localhost:8080/api/v1/whatsapp/media/M1?exp=1&sig=a",
    caption: "my pic",
  };
  const [rendered] = renderSlackMessage({
    id: 7,
    message_type: "image",
    content: JSON.stringify(payload),
    payload,
  });
  const shown = JSON.stringify(rendered.blocks);
  assert.ok(shown.includes("my pic"), shown);
  assert.ok(!shown.includes('\\"url\\"'), shown);
  assert.equal(rendered.text.includes("{"), false, rendered.text);
});

Deno.test("renderSlackMessage() renders a template as its name, filled-in texts and quick-reply buttons", async () => {
  await assertRendersAs(
    "template",
    message("template", {
      name: "order_update",
      language: "en_US",
      components: [
        { type: "body", parameters: [{ type: "text", text: "Ana" }] },
        {
          type: "button",
          sub_type: "quick_reply",
          index: "0",
          parameters: [{ type: "payload", payload: "yes" }],
        },
      ],
    }),
  );
});

Deno.test("renderSlackMessage() falls back to the content when the payload does not fit", async () => {
  const [rendered] = await assertRendersAs("invalid_payload", {
    id: 42,
    message_type: "buttons",
    content: '{"text":"Pick <one>","buttons":[]}',
    payload: { text: "Pick <one>", buttons: [] },
  });
  assert.equal(rendered.blocks.length, 1);
});

Deno.test("renderSlackMessage() keeps text of 3000 characters in one section", async () => {
  const [rendered] = await assertRendersAs("text_3000", message("text", words(3000)));
  assert.equal(rendered.blocks.length, 1);
  assert.equal(rendered.blocks[0].type === "section" && rendered.blocks[0].text.text, words(3000));
});

Deno.test("renderSlackMessage() splits text of 3001 characters at a word into two sections", async () => {
  const rendered = await assertRendersAs("text_3001", message("text", words(3001)));
  const texts = rendered[0].blocks.map((block) => block.type === "section" ? block.text.text : "");
  assert.equal(texts.length, 2);
  assert.equal(texts.join(" "), words(3001));
});

Deno.test("renderSlackMessage() splits text of 10000 characters at lines into four sections", async () => {
  const text = words(10_000, 12);
  const rendered = await assertRendersAs("text_10000", message("text", text));
  assert.equal(rendered.length, 1);
  assert.equal(rendered[0].blocks.length, 4);
  const texts = rendered.flatMap((one) =>
    one.blocks.map((b) => b.type === "section" ? b.text.text : "")
  );
  assert.equal(texts.join("\n"), text);
});

/** A buttons message with one button titled `title`. */
function oneButton(title: string): SlackMessageSource {
  return message("buttons", { text: "Choose", buttons: [{ id: "b1", title }] });
}

Deno.test("renderSlackMessage() keeps a button title of 75 characters whole", async () => {
  const [rendered] = await assertRendersAs("button_title_75", oneButton("t".repeat(74) + "!"));
  assert.deepEqual(rendered.blocks.map((block) => block.type), ["section", "actions"]);
});

Deno.test("renderSlackMessage() cuts a button title of 76 characters and shows it in full", async () => {
  const title = "t".repeat(75) + "!";
  const [rendered] = await assertRendersAs("button_title_76", oneButton(title));
  const [, actions, context] = rendered.blocks;
  assert.equal(actions.type === "actions" && actions.elements[0].text.text, "t".repeat(74) + "…");
  assert.equal(context.type === "context" && context.elements[0].text, title);
});

Deno.test("renderSlackMessage() spreads markdown of more than 50 blocks over messages", async () => {
  const parts = Array.from({ length: 40 }, (_, n) => `## Part ${n + 1}\nText of part ${n + 1}.`);
  const rendered = await assertRendersAs(
    "markdown_over_50_blocks",
    message("markdown", parts.join("\n---\n")),
  );
  assert.equal(rendered.length, 2);
  assert.equal(rendered[0].blocks.length, 50);
  const sections = rendered.flatMap((one) =>
    one.blocks.filter((block) => block.type === "section")
  );
  assert.equal(sections.length, 40);
});

Deno.test("renderSlackMessage() closes and reopens a code block split across sections", () => {
  const code = Array.from({ length: 300 }, (_, n) => `line ${n} <tag> && more text`).join("\n");
  const rendered = renderSlackMessage(message("markdown", "```\n" + code + "\n```"));
  assertWithinLimits(rendered);
  const texts = rendered.flatMap((one) =>
    one.blocks.map((b) => b.type === "section" ? b.text.text : "")
  );
  assert.ok(texts.length >= 3);
  for (const text of texts) assert.match(text, /^```\n[\s\S]*\n```$/);
});

Deno.test("renderSlackMessage() escapes mentions, entities and links in text", async () => {
  const text = "<!channel> <@U123|x> &amp; <https://evil.example|click here> @here <#C1>";
  const [rendered] = await assertRendersAs("hostile_text", message("text", text));
  const section = rendered.blocks[0];
  assert.equal(
    section.type === "section" && section.text.text,
    "&lt;!channel&gt; &lt;@U123|x&gt; &amp;amp; &lt;<https://evil.example>|click here&gt; @here &lt;#C1&gt;",
  );
});

Deno.test("renderSlackMessage() keeps a markdown link's url and label from breaking out", async () => {
  const markdown = [
    "[pipe](https://evil.example/a|<!channel>)",
    "[angle](https://evil.example/a>b)",
    "[<!here> & co](https://ok.example/?a=1&b=2)",
    "[script](javascript:alert%281%29)",
    "[mention](<@U123>)",
  ].join("\n");
  const [rendered] = await assertRendersAs("hostile_markdown", message("markdown", markdown));
  const section = rendered.blocks[0];
  assert.equal(
    section.type === "section" && section.text.text,
    [
      "<https://evil.example/a%7C%3C!channel%3E|pipe>",
      "<https://evil.example/a%3Eb|angle>",
      "<https://ok.example/?a=1&amp;b=2|&lt;!here&gt; &amp; co>",
      "script (javascript:alert%281%29)",
      "mention (&lt;@U123&gt;)",
    ].join("\n"),
  );
});

Deno.test("renderSlackMessage() splits escaped text that outgrows one message", () => {
  const text = "<".repeat(10_000);
  const rendered = renderSlackMessage(message("text", text));
  assertWithinLimits(rendered);
  assert.ok(rendered.length >= 4);
  const sections = rendered.flatMap((one) =>
    one.blocks.map((b) => b.type === "section" ? b.text.text : "")
  );
  assert.equal(sections.join("").replaceAll("\n", ""), "&lt;".repeat(10_000));
});

Deno.test("parseSlackAction() reads back every button of a rendered carousel", () => {
  const rendered = renderSlackMessage(message("carousel", carousel(3), 9001));
  const clicks = rendered.flatMap((one) =>
    one.blocks.flatMap((block) =>
      block.type === "actions"
        ? block.elements.map((button) => parseSlackAction(block.block_id, button.value))
        : []
    )
  );
  assert.deepEqual(
    clicks,
    ["buy_1", "info_1", "buy_2", "info_2", "buy_3", "info_3"].map((buttonId) => ({
      messageId: 9001,
      buttonId,
    })),
  );
});

Deno.test("parseSlackAction() returns null for block ids and values that are not ours", () => {
  assert.equal(parseSlackAction("parley_message:1:0", "sales")?.messageId, 1);
  for (
    const blockId of [
      "",
      "other",
      "parley_message:1",
      "parley_message:x:0",
      "parley_message:01:0",
      "parley_message:1:0:2",
      "parley_message:99999999999999999:0",
      "parley_button:0",
    ]
  ) {
    assert.equal(parseSlackAction(blockId, "sales"), null, blockId);
  }
  assert.equal(parseSlackAction("parley_message:1:0", ""), null);
  assert.equal(
    parseSlackAction("parley_message:1:0", "sa\u0000les"),
    null,
    "no button id has a NUL",
  );
  assert.equal(parseSlackAction("parley_message:1:0", "x".repeat(257)), null);
});

/** Pieces that markdown and hostile text are made of. */
const TOKEN = fc.oneof(
  fc.constantFrom(
    "**",
    "*",
    "_",
    "__",
    "~~",
    "`",
    "[",
    "](",
    ")",
    "# ",
    "- ",
    "1. ",
    "> ",
    "---",
    "\n",
    "\n\n",
    " ",
    "<!channel>",
    "<@U1|x>",
    "&",
    "&amp;",
    "|",
    ">",
    "<",
    "https://x.example/a|b>c",
    "![",
    "https://parley.example/?a=1&b=2",
    "```",
    "~~~",
  ),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 }),
  fc.stringMatching(/^[a-z0-9]{1,4000}$/),
);

/** Text made of {@linkcode TOKEN}s, up to about 12,000 characters. */
const TEXT = fc.array(TOKEN, { maxLength: 400 }).map((tokens) => tokens.join(""));

/** The input's words, leaving out code fence language tags, which are dropped by design. */
function wordsOutsideFenceTags(markdown: string): string {
  return markdown.replace(/^ {0,3}(?:`{3,}(?=[^`\n\r]*$)|~{3,}).*$/gm, "");
}

Deno.test("renderSlackMessage() keeps every limit and every word of any text or markdown", () => {
  fc.assert(
    fc.property(TEXT, fc.constantFrom<MessageType>("text", "markdown"), (content, type) => {
      const rendered = renderSlackMessage({ id: 1, message_type: type, content, payload: null });
      assertWithinLimits(rendered);
      assertNoWordLost(type === "markdown" ? wordsOutsideFenceTags(content) : content, rendered);
    }),
    { numRuns: 300 },
  );
});

/** A button or card title: not blank, at most 256 characters, often over 75. */
const TITLE = fc.string({ unit: "grapheme", minLength: 1, maxLength: 120 })
  .filter((title) => /\S/.test(title) && title.length <= 256);

/** A card's texts; its buttons get ids when the document is built. */
const CARD = fc.record({
  title: TITLE,
  subtitle: TEXT.map((text) => text.slice(0, 4096)),
  buttons: fc.array(TITLE, { minLength: 1, maxLength: 5 }),
});

/** A buttons or carousel document made of `cards`, and every text in it. */
function richDocument(
  cards: { title: string; subtitle: string; buttons: string[] }[],
  asButtons: boolean,
) {
  let next = 0;
  const withIds = (titles: string[]) => titles.map((title) => ({ id: `b${next++}`, title }));
  if (asButtons) {
    const text = /\S/.test(cards[0].subtitle) ? cards[0].subtitle : "Choose";
    return {
      type: "buttons" as const,
      payload: { text, buttons: withIds(cards[0].buttons) },
      texts: [text, ...cards[0].buttons],
    };
  }
  return {
    type: "carousel" as const,
    payload: { cards: cards.map((card) => ({ ...card, buttons: withIds(card.buttons) })) },
    texts: cards.flatMap((card) => [card.title, card.subtitle, ...card.buttons]),
  };
}

Deno.test("renderSlackMessage() keeps every limit and every word of any buttons or carousel", () => {
  fc.assert(
    fc.property(
      fc.array(CARD, { minLength: 1, maxLength: 10 }),
      fc.boolean(),
      (cards, asButtons) => {
        const { type, payload, texts } = richDocument(cards, asButtons);
        const content = JSON.stringify(payload);
        const rendered = renderSlackMessage({ id: 3, message_type: type, content, payload });
        assertWithinLimits(rendered);
        assertNoWordLost(texts.join(" "), rendered);
      },
    ),
    { numRuns: 150 },
  );
});

Deno.test("renderSlackMessage() shows an empty message rather than nothing", () => {
  const [rendered] = renderSlackMessage({
    id: 1,
    message_type: "text",
    content: " \n ",
    payload: null,
  });
  assert.deepEqual(rendered, {
    text: "_(empty message)_",
    blocks: [{
      type: "section",
      text: { type: "mrkdwn", text: "_(empty message)_", verbatim: true },
    }],
  });
});

Deno.test("renderSlackMessage() never splits a link across sections", () => {
  const link = `[${"label ".repeat(300)}](https://parley.example/${"p".repeat(1000)})`;
  const rendered = renderSlackMessage(message("markdown", `${"a".repeat(2000)} ${link} end`));
  assertWithinLimits(rendered);
  const texts = rendered.flatMap((one) =>
    one.blocks.map((b) => b.type === "section" ? b.text.text : "")
  );
  assert.deepEqual(texts.map((text) => text.length), [2000, 2829]);
  assert.match(texts[1], /^<https:\/\/parley\.example\/p+\|(label )+label> end$/);
});

Deno.test("renderSlackMessage shows Markdown that renders to nothing as written, never as empty", () => {
  for (const content of ["---", "***", "* * *"]) {
    const [message] = renderSlackMessage({
      id: 1,
      message_type: "markdown",
      content,
      payload: null,
    });
    assert.deepEqual(message.blocks, [{
      type: "section",
      text: { type: "mrkdwn", text: content, verbatim: true },
    }]);
    assert.equal(message.text, content);
  }
});

Deno.test("renderSlackMessage() links a markdown destination holding balanced parentheses whole", () => {
  const [rendered] = renderSlackMessage(
    message("markdown", "See [Mercury](https://en.wikipedia.org/wiki/Mercury_(planet)) now."),
  );
  const section = rendered.blocks[0];
  assert.equal(
    section.type === "section" && section.text.text,
    "See <https://en.wikipedia.org/wiki/Mercury_(planet)|Mercury> now.",
  );
});

Deno.test("renderSlackMessage() opens the first post with the lead, in its blocks and text", () => {
  const lead = "↩ Replying to Bot: “Ship it?”";
  const rendered = renderSlackMessage(message("text", "yes"), { lead });
  assert.deepEqual(rendered, [{
    text: `${lead}\nyes`,
    blocks: [
      { type: "context", elements: [{ type: "mrkdwn", text: lead, verbatim: true }] },
      { type: "section", text: { type: "mrkdwn", text: "yes", verbatim: true } },
    ],
  }]);
  assert.deepEqual(renderSlackPlainText(message("text", "yes"), { lead }), [`${lead}\nyes`]);
});

Deno.test("renderSlackMessage() keeps room for a lead of any length in full posts, in as many posts", () => {
  const parts = Array.from({ length: 40 }, (_, n) => `## Part ${n + 1}\nText of part ${n + 1}.`);
  const sources = [
    message("markdown", parts.join("\n---\n")),
    message("text", words(10_000)),
    { id: 42, message_type: "text" as const, content: words(25_000, 9), payload: null },
  ];
  for (const source of sources) {
    const short = renderSlackMessage(source, { lead: "↩" });
    const long = renderSlackMessage(source, { lead: "&amp;".repeat(400) });
    assertWithinLimits(short);
    assertWithinLimits(long);
    assert.equal(long.length, short.length);
    assert.equal(long[0].blocks[0].type, "context");
    assert.ok(long[0].blocks.length <= 50);
  }
});

Deno.test("renderSlackMessage() sets a card title holding asterisks in bold whole, its asterisks as look-alikes", () => {
  const payload = { title: "5* Hotel – rated 4.5*", buttons: [{ id: "a", title: "Book" }] };
  const [rendered] = renderSlackMessage({
    id: 3,
    message_type: "card",
    content: JSON.stringify(payload),
    payload,
  });
  const section = rendered.blocks.find((block) => block.type === "section") as {
    text: { text: string };
  };
  assert.equal(section.text.text, "*5\u2217 Hotel – rated 4.5\u2217*");
});
