import assert from "node:assert/strict";
import fc from "fast-check";
import { z } from "zod";
import { AppError } from "./app_error.ts";
import {
  buttonsOffered,
  characterCount,
  isMessageType,
  MESSAGE_TYPES,
  parseMessageContent,
  RICH_CONTENT_SCHEMAS,
} from "./message_kinds.ts";
import { plainTextOf } from "./plain_text.ts";
import { TEMPLATE_CONTENT } from "./rich_content.ts";

const UNKNOWN_TYPE =
  "message_type must be one of: text, markdown, card, buttons, carousel, form, image, file, template";
const TOO_LONG = "content is too long (max 10000 characters)";

/** The exact 400 text for rich content that fails its schema. */
function invalid(type: string, detail: string): string {
  return `content is not valid for message_type ${type}: ${detail}`;
}

/** Asserts that parsing throws an AppError 400 with exactly `message`. */
function assertRejected(type: string, content: string, message: string): void {
  assert.throws(() => parseMessageContent(type, content), (error: unknown) => {
    assert.ok(error instanceof AppError);
    assert.equal(error.status, 400);
    assert.equal(error.message, message);
    return true;
  });
}

/** Parses `document` as JSON content of `type` and returns the payload. */
function payloadOf(type: string, document: unknown): unknown {
  return parseMessageContent(type, JSON.stringify(document)).payload;
}

/** `n` buttons with distinct ids. */
function buttons(n: number): { id: string; title: string }[] {
  return Array.from({ length: n }, (_, i) => ({ id: `b${i}`, title: `Button ${i}` }));
}

/** `n` cards with distinct titles and no buttons. */
function cards(n: number): { title: string }[] {
  return Array.from({ length: n }, (_, i) => ({ title: `Card ${i}` }));
}

/** `n` form fields with distinct names. */
function fields(n: number): { name: string; label: string; type: string }[] {
  return Array.from(
    { length: n },
    (_, i) => ({ name: `f${i}`, label: `Field ${i}`, type: "text" }),
  );
}

Deno.test("MESSAGE_TYPES lists the contract's types in contract order", () => {
  assert.deepEqual(
    [...MESSAGE_TYPES],
    ["text", "markdown", "card", "buttons", "carousel", "form", "image", "file", "template"],
  );
});

Deno.test("isMessageType() accepts every message type", () => {
  for (const type of MESSAGE_TYPES) assert.equal(isMessageType(type), true);
});

Deno.test("isMessageType() rejects unknown, differently cased and empty values", () => {
  for (const value of ["video", "Text", "TEXT", "", " text", "toString", "__proto__"]) {
    assert.equal(isMessageType(value), false);
  }
});

Deno.test("parseMessageContent() rejects an unknown message_type", () => {
  assertRejected("video", "hello", UNKNOWN_TYPE);
  assertRejected("", "hello", UNKNOWN_TYPE);
});

Deno.test("parseMessageContent() checks message_type before the content length", () => {
  assertRejected("video", "x".repeat(10_001), UNKNOWN_TYPE);
});

Deno.test("parseMessageContent() accepts text and markdown with a null payload", () => {
  assert.deepEqual(parseMessageContent("text", "hello"), { messageType: "text", payload: null });
  assert.deepEqual(parseMessageContent("markdown", "**hi**"), {
    messageType: "markdown",
    payload: null,
  });
});

Deno.test("parseMessageContent() accepts text of exactly 10000 characters", () => {
  const content = "x".repeat(10_000);
  assert.deepEqual(parseMessageContent("text", content), { messageType: "text", payload: null });
});

Deno.test("parseMessageContent() rejects text of 10001 characters", () => {
  assertRejected("text", "x".repeat(10_001), TOO_LONG);
  assertRejected("markdown", "x".repeat(10_001), TOO_LONG);
});

Deno.test("parseMessageContent() checks the length of rich content before parsing it", () => {
  assertRejected("buttons", "x".repeat(10_001), TOO_LONG);
  const padded = JSON.stringify({ text: "hi", buttons: buttons(1) }) + " ".repeat(10_000);
  assertRejected("buttons", padded, TOO_LONG);
});

Deno.test("parseMessageContent() accepts rich content of exactly 10000 characters", () => {
  const json = JSON.stringify({ text: "hi", buttons: buttons(1) });
  const padded = json + " ".repeat(10_000 - json.length);
  assert.equal(padded.length, 10_000);
  assert.deepEqual(parseMessageContent("buttons", padded).payload, {
    text: "hi",
    buttons: buttons(1),
  });
});

Deno.test("parseMessageContent() accepts any string of at most 10000 characters without NUL as text", () => {
  const codeUnit = fc.integer({ min: 1, max: 0xffff }).map((n) => String.fromCharCode(n));
  fc.assert(
    // Any UTF-16 code unit (lone surrogates too), so maxLength bounds `content.length` exactly;
    // size "max" spreads lengths over the whole 0..10000 range.
    fc.property(fc.string({ maxLength: 10_000, unit: codeUnit, size: "max" }), (content) => {
      assert.deepEqual(parseMessageContent("text", content), {
        messageType: "text",
        payload: null,
      });
    }),
  );
});

Deno.test("parseMessageContent() rejects rich content that is not JSON", () => {
  for (const type of ["card", "buttons", "carousel", "form", "image", "file", "template"]) {
    assertRejected(type, "hello", invalid(type, "not a JSON document"));
  }
  assertRejected("buttons", "", invalid("buttons", "not a JSON document"));
  assertRejected("buttons", "{'text': 'hi'}", invalid("buttons", "not a JSON document"));
});

Deno.test("parseMessageContent() rejects a JSON value that is not an object", () => {
  for (const content of ["[]", "null", "42", '"text"', "true"]) {
    assertRejected("card", content, invalid("card", "not a JSON object"));
  }
});

Deno.test("parseMessageContent() accepts buttons and strips unknown keys", () => {
  const payload = payloadOf("buttons", {
    text: "Pick one",
    buttons: [{ id: "yes", title: "Yes", color: "green" }, { id: "no", title: "No" }],
    extra: true,
  });
  assert.deepEqual(payload, {
    text: "Pick one",
    buttons: [{ id: "yes", title: "Yes" }, { id: "no", title: "No" }],
  });
});

Deno.test("parseMessageContent() accepts a card and strips unknown keys", () => {
  const payload = payloadOf("card", {
    title: "Red shoes",
    subtitle: "Size 42",
    image_url: "https://cdn.example.com/shoes.png",
    buttons: [{ id: "buy", title: "Buy", url: "https://x.example" }],
    price: 10,
  });
  assert.deepEqual(payload, {
    title: "Red shoes",
    subtitle: "Size 42",
    image_url: "https://cdn.example.com/shoes.png",
    buttons: [{ id: "buy", title: "Buy" }],
  });
});

Deno.test("parseMessageContent() accepts a card with only a title", () => {
  assert.deepEqual(payloadOf("card", { title: "Hello" }), { title: "Hello" });
});

Deno.test("parseMessageContent() accepts a carousel and strips unknown keys", () => {
  const payload = payloadOf("carousel", {
    cards: [
      { title: "A", buttons: [{ id: "a", title: "Pick A" }], rank: 1 },
      { title: "B", image_url: "https://example.com/b.png" },
    ],
    loop: true,
  });
  assert.deepEqual(payload, {
    cards: [
      { title: "A", buttons: [{ id: "a", title: "Pick A" }] },
      { title: "B", image_url: "https://example.com/b.png" },
    ],
  });
});

Deno.test("parseMessageContent() accepts a form and strips unknown keys", () => {
  const payload = payloadOf("form", {
    title: "Contact us",
    fields: [
      { name: "email", label: "Email", type: "email", placeholder: "you@example.com" },
      { name: "age", label: "Age", type: "number" },
      { name: "note", label: "Note", type: "text" },
    ],
    submit: "Send",
  });
  assert.deepEqual(payload, {
    title: "Contact us",
    fields: [
      { name: "email", label: "Email", type: "email" },
      { name: "age", label: "Age", type: "number" },
      { name: "note", label: "Note", type: "text" },
    ],
  });
});

Deno.test("parseMessageContent() accepts an image and a file and strips unknown keys", () => {
  const image = { url: "https://example.com/a.png", caption: "A cat", width: 100 };
  assert.deepEqual(payloadOf("image", image), {
    url: "https://example.com/a.png",
    caption: "A cat",
  });
  const file = { url: "https://example.com/a.pdf", filename: "a.pdf", size: 3 };
  assert.deepEqual(payloadOf("file", file), {
    url: "https://example.com/a.pdf",
    filename: "a.pdf",
  });
});

Deno.test("parseMessageContent() accepts a template and passes its components through", () => {
  const components = [
    { type: "body", parameters: [{ type: "text", text: "Ann" }] },
    { type: "button", sub_type: "quick_reply", index: "0", parameters: [] },
  ];
  const payload = payloadOf("template", {
    name: "order_update",
    language: "en_US",
    components,
    namespace: "x",
  });
  assert.deepEqual(payload, { name: "order_update", language: "en_US", components });
  assert.deepEqual(payloadOf("template", { name: "hello_world", language: "en" }), {
    name: "hello_world",
    language: "en",
  });
});

Deno.test("parseMessageContent() rejects template components that are not objects", () => {
  const content = JSON.stringify({ name: "t", language: "en", components: ["body"] });
  assertRejected("template", content, invalid("template", "components.0 must be an object"));
  const notArray = JSON.stringify({ name: "t", language: "en", components: { type: "body" } });
  assertRejected("template", notArray, invalid("template", "components must be an array"));
});

Deno.test("parseMessageContent() rejects a template without a name or language", () => {
  assertRejected("template", '{"language":"en"}', invalid("template", "name is required"));
  assertRejected(
    "template",
    '{"name":"t","language":" "}',
    invalid("template", "language is required"),
  );
});

Deno.test("parseMessageContent() accepts 1 and 10 buttons", () => {
  assert.deepEqual(payloadOf("buttons", { text: "t", buttons: buttons(1) }), {
    text: "t",
    buttons: buttons(1),
  });
  assert.deepEqual(payloadOf("buttons", { text: "t", buttons: buttons(10) }), {
    text: "t",
    buttons: buttons(10),
  });
});

Deno.test("parseMessageContent() rejects 0 and 11 buttons", () => {
  const expected = invalid("buttons", "buttons must have 1 to 10 items");
  assertRejected("buttons", JSON.stringify({ text: "t", buttons: [] }), expected);
  assertRejected("buttons", JSON.stringify({ text: "t", buttons: buttons(11) }), expected);
});

Deno.test("parseMessageContent() rejects buttons content without a buttons array", () => {
  assertRejected("buttons", '{"text":"t"}', invalid("buttons", "buttons is required"));
  assertRejected(
    "buttons",
    '{"text":"t","buttons":"yes"}',
    invalid("buttons", "buttons must be an array"),
  );
});

Deno.test("parseMessageContent() accepts 5 card buttons and rejects 6", () => {
  assert.deepEqual(payloadOf("card", { title: "t", buttons: buttons(5) }), {
    title: "t",
    buttons: buttons(5),
  });
  assertRejected(
    "card",
    JSON.stringify({ title: "t", buttons: buttons(6) }),
    invalid("card", "buttons must have at most 5 items"),
  );
});

Deno.test("parseMessageContent() accepts 10 carousel cards and rejects 0 and 11", () => {
  assert.deepEqual(payloadOf("carousel", { cards: cards(10) }), { cards: cards(10) });
  const expected = invalid("carousel", "cards must have 1 to 10 items");
  assertRejected("carousel", JSON.stringify({ cards: [] }), expected);
  assertRejected("carousel", JSON.stringify({ cards: cards(11) }), expected);
});

Deno.test("parseMessageContent() rejects 6 buttons on a carousel card", () => {
  assertRejected(
    "carousel",
    JSON.stringify({ cards: [{ title: "t", buttons: buttons(6) }] }),
    invalid("carousel", "cards.0.buttons must have at most 5 items"),
  );
});

Deno.test("parseMessageContent() accepts 10 form fields and rejects 0 and 11", () => {
  assert.deepEqual(payloadOf("form", { title: "t", fields: fields(10) }), {
    title: "t",
    fields: fields(10),
  });
  const expected = invalid("form", "fields must have 1 to 10 items");
  assertRejected("form", JSON.stringify({ title: "t", fields: [] }), expected);
  assertRejected("form", JSON.stringify({ title: "t", fields: fields(11) }), expected);
});

Deno.test("parseMessageContent() rejects a form field of an unknown type", () => {
  const content = JSON.stringify({
    title: "t",
    fields: [{ name: "d", label: "Date", type: "date" }],
  });
  assertRejected(
    "form",
    content,
    invalid("form", "fields.0.type must be one of: text, email, number"),
  );
  const missing = JSON.stringify({ title: "t", fields: [{ name: "d", label: "Date" }] });
  assertRejected("form", missing, invalid("form", "fields.0.type is required"));
});

Deno.test("parseMessageContent() rejects blank required strings", () => {
  assertRejected(
    "buttons",
    JSON.stringify({ text: "t", buttons: [{ id: "a", title: "  " }] }),
    invalid("buttons", "buttons.0.title is required"),
  );
  assertRejected(
    "buttons",
    JSON.stringify({ text: "\n\t ", buttons: buttons(1) }),
    invalid("buttons", "text is required"),
  );
  assertRejected(
    "buttons",
    JSON.stringify({ text: "t", buttons: [{ id: "", title: "A" }] }),
    invalid("buttons", "buttons.0.id is required"),
  );
  assertRejected("card", JSON.stringify({ title: "\u00a0" }), invalid("card", "title is required"));
  // Invisible characters render as a blank button: zero-width space, word joiner, soft hyphen,
  // Hangul filler.
  assertRejected(
    "buttons",
    JSON.stringify({ text: "t", buttons: [{ id: "a", title: "\u200b\u2060\u00ad\u3164" }] }),
    invalid("buttons", "buttons.0.title is required"),
  );
  assertRejected(
    "buttons",
    JSON.stringify({ text: "\u200b", buttons: buttons(1) }),
    invalid("buttons", "text is required"),
  );
  assertRejected(
    "form",
    JSON.stringify({ title: "t", fields: [{ name: "n", label: " ", type: "text" }] }),
    invalid("form", "fields.0.label is required"),
  );
});

Deno.test("parseMessageContent() rejects missing required strings", () => {
  assertRejected(
    "buttons",
    JSON.stringify({ text: "t", buttons: [{ id: "a" }] }),
    invalid("buttons", "buttons.0.title is required"),
  );
  assertRejected("card", "{}", invalid("card", "title is required"));
  assertRejected("image", "{}", invalid("image", "url is required"));
});

Deno.test("parseMessageContent() rejects strings of the wrong JSON type", () => {
  assertRejected("card", '{"title":5}', invalid("card", "title must be a string"));
  assertRejected(
    "card",
    '{"title":"t","subtitle":null}',
    invalid("card", "subtitle must be a string"),
  );
});

Deno.test("parseMessageContent() accepts titles of 256 characters and rejects 257", () => {
  assert.deepEqual(payloadOf("card", { title: "x".repeat(256) }), { title: "x".repeat(256) });
  assertRejected(
    "card",
    JSON.stringify({ title: "x".repeat(257) }),
    invalid("card", "title must be at most 256 characters"),
  );
  assertRejected(
    "buttons",
    JSON.stringify({ text: "t", buttons: [{ id: "x".repeat(257), title: "A" }] }),
    invalid("buttons", "buttons.0.id must be at most 256 characters"),
  );
});

Deno.test("parseMessageContent() rejects urls that are not https", () => {
  const bad = [
    "http://example.com/a.png",
    "ftp://example.com/a.png",
    "javascript:alert(1)",
    "data:image/png;base64,AAAA",
    "//example.com/a.png",
    "/a.png",
    "not a url",
    "https://",
    "https:example.com/a.png",
    " https://example.com/a.png",
    "",
    "https://exa\nmple.com/a.png",
    "https://example.com/a\t.png",
    "https://example.com/a.png\r\nX-Injected: 1",
    "https://example.com/\u0000a.png",
    "https://example.com/a\u007f.png",
    "https://example.com/a\u0085.png",
  ];
  for (const url of bad) {
    assertRejected("image", JSON.stringify({ url }), invalid("image", "url must be an https URL"));
    assertRejected("file", JSON.stringify({ url }), invalid("file", "url must be an https URL"));
    assertRejected(
      "card",
      JSON.stringify({ title: "t", image_url: url }),
      invalid("card", "image_url must be an https URL"),
    );
  }
});

Deno.test("parseMessageContent() rejects https urls with a username or password", () => {
  for (const url of ["https://user:secret@example.com/a.png", "https://user@example.com/a.png"]) {
    assertRejected("image", JSON.stringify({ url }), invalid("image", "url must be an https URL"));
  }
});

Deno.test("parseMessageContent() rejects duplicate button ids in a buttons message", () => {
  const content = JSON.stringify({
    text: "t",
    buttons: [{ id: "a", title: "A" }, { id: "b", title: "B" }, { id: "a", title: "C" }],
  });
  assertRejected(
    "buttons",
    content,
    invalid("buttons", "buttons.2.id must be unique within the message"),
  );
});

Deno.test("parseMessageContent() rejects duplicate button ids on a card", () => {
  const content = JSON.stringify({
    title: "t",
    buttons: [{ id: "a", title: "A" }, { id: "a", title: "B" }],
  });
  assertRejected(
    "card",
    content,
    invalid("card", "buttons.1.id must be unique within the message"),
  );
});

Deno.test("parseMessageContent() rejects duplicate button ids across carousel cards", () => {
  const content = JSON.stringify({
    cards: [
      { title: "A", buttons: [{ id: "pick", title: "Pick" }] },
      { title: "B", buttons: [{ id: "pick", title: "Pick" }] },
    ],
  });
  assertRejected(
    "carousel",
    content,
    invalid("carousel", "cards.1.buttons.0.id must be unique within the message"),
  );
});

Deno.test("parseMessageContent() rejects duplicate form field names", () => {
  const content = JSON.stringify({
    title: "t",
    fields: [{ name: "a", label: "A", type: "text" }, { name: "a", label: "B", type: "email" }],
  });
  assertRejected("form", content, invalid("form", "fields.1.name must be unique within the form"));
});

Deno.test("RICH_CONTENT_SCHEMAS covers every rich type and converts to JSON Schema", () => {
  assert.deepEqual(
    Object.keys(RICH_CONTENT_SCHEMAS),
    MESSAGE_TYPES.filter((type) => type !== "text" && type !== "markdown"),
  );
  for (const schema of Object.values(RICH_CONTENT_SCHEMAS)) {
    const json = z.toJSONSchema(schema);
    assert.equal(json.type, "object");
  }
});

Deno.test("plainTextOf() returns the content of text and markdown", () => {
  assert.equal(plainTextOf("text", null, "hello"), "hello");
  assert.equal(plainTextOf("markdown", null, "**hello**"), "**hello**");
});

Deno.test("plainTextOf() renders buttons as the text and a bullet per button", () => {
  const payload = {
    text: "Pick one",
    buttons: [{ id: "y", title: "Yes" }, { id: "n", title: "No" }],
  };
  assert.equal(plainTextOf("buttons", payload, ""), "Pick one\n• Yes\n• No");
});

Deno.test("plainTextOf() renders a card as title, subtitle, image url and buttons", () => {
  const payload = {
    title: "Red shoes",
    subtitle: "Size 42",
    image_url: "https://cdn.example.com/shoes.png",
    buttons: [{ id: "buy", title: "Buy" }],
  };
  assert.equal(
    plainTextOf("card", payload, ""),
    "Red shoes\nSize 42\nhttps://cdn.example.com/shoes.png\n• Buy",
  );
  assert.equal(plainTextOf("card", { title: "Only", subtitle: " " }, ""), "Only");
});

Deno.test("plainTextOf() renders a carousel as cards separated by blank lines", () => {
  const payload = {
    cards: [
      { title: "A", buttons: [{ id: "a", title: "Pick A" }] },
      { title: "B", subtitle: "Second" },
    ],
  };
  assert.equal(plainTextOf("carousel", payload, ""), "A\n• Pick A\n\nB\nSecond");
});

Deno.test("plainTextOf() renders a form as the title and a line per field label", () => {
  const payload = {
    title: "Contact us",
    fields: [{ name: "e", label: "Email", type: "email" }, {
      name: "a",
      label: "Age",
      type: "number",
    }],
  };
  assert.equal(plainTextOf("form", payload, ""), "Contact us\nEmail:\nAge:");
});

Deno.test("plainTextOf() renders an image as its caption then its url", () => {
  const payload = { url: "https://example.com/a.png", caption: "A cat", filename: "a.png" };
  assert.equal(plainTextOf("image", payload, ""), "A cat\nhttps://example.com/a.png");
});

Deno.test("plainTextOf() renders a file as its file name then its url when it has no caption", () => {
  const payload = { url: "https://example.com/a.pdf", filename: "a.pdf" };
  assert.equal(plainTextOf("file", payload, ""), "a.pdf\nhttps://example.com/a.pdf");
});

Deno.test("plainTextOf() renders media with neither caption nor file name as its url", () => {
  const payload = { url: "https://example.com/a.pdf", caption: "" };
  assert.equal(plainTextOf("file", payload, ""), "https://example.com/a.pdf");
});

Deno.test("plainTextOf() renders a template as its name, the texts it fills in and its quick replies", () => {
  const bare = { name: "order_update", language: "en_US", components: [{ type: "body" }] };
  assert.equal(plainTextOf("template", bare, ""), "Template order_update (en_US)");
  const filled = {
    name: "order_update",
    language: "en_US",
    components: [
      { type: "header", parameters: [{ type: "text", text: "Ana" }] },
      {
        type: "body",
        parameters: [
          { type: "text", text: "#1234" },
          { type: "currency", currency: { fallback_value: "$10", code: "USD", amount_1000: 10 } },
          { type: "image", image: { link: "https://example.com/a.png" } },
        ],
      },
      {
        type: "button",
        sub_type: "quick_reply",
        index: "0",
        parameters: [{ type: "payload", payload: "yes" }],
      },
    ],
  };
  assert.equal(
    plainTextOf("template", filled, ""),
    "Template order_update (en_US)\nAna · #1234 · $10\n• yes",
  );
});

Deno.test("plainTextOf() falls back to the content when the payload does not fit its type", () => {
  assert.equal(plainTextOf("buttons", null, '{"raw":true}'), '{"raw":true}');
  assert.equal(plainTextOf("card", { subtitle: "no title" }, "raw"), "raw");
});

Deno.test("plainTextOf() degrades every parsed sample to non-empty text", () => {
  const samples: [string, unknown][] = [
    ["card", { title: "t" }],
    ["buttons", { text: "t", buttons: buttons(2) }],
    ["carousel", { cards: cards(2) }],
    ["form", { title: "t", fields: fields(2) }],
    ["image", { url: "https://example.com/a.png" }],
    ["file", { url: "https://example.com/a.pdf" }],
    ["template", { name: "t", language: "en" }],
  ];
  for (const [type, document] of samples) {
    const { messageType, payload } = parseMessageContent(type, JSON.stringify(document));
    assert.notEqual(plainTextOf(messageType, payload, "").trim(), "");
  }
});

Deno.test("parseMessageContent() refuses a NUL character, raw or escaped in a document", () => {
  for (
    const [type, content] of [
      ["text", "a\0b"],
      ["markdown", "\0"],
      ["buttons", JSON.stringify({ text: "a\0", buttons: [{ id: "x", title: "X" }] })],
      ["template", JSON.stringify({ name: "t", language: "en", components: [{ v: "\0" }] })],
    ]
  ) {
    assert.throws(
      () => parseMessageContent(type, content),
      (error: unknown) =>
        error instanceof AppError && error.status === 400 &&
        error.message === "content must not contain NUL characters",
      type,
    );
  }
  assert.deepEqual(parseMessageContent("text", "a\\u0000b"), {
    messageType: "text",
    payload: null,
  });
});

Deno.test("a card stored before URLs with a control character were refused still offers its buttons", () => {
  const card = {
    title: "Shoes",
    image_url: "https://cdn.example.com/a\tb.png",
    buttons: [{ id: "buy", title: "Buy" }],
  };
  assert.throws(
    () => parseMessageContent("card", JSON.stringify(card)),
    (error: AppError) => error.message === invalid("card", "image_url must be an https URL"),
  );
  assert.deepEqual(buttonsOffered("card", card), [{ id: "buy", title: "Buy" }]);
  assert.throws(
    () =>
      parseMessageContent(
        "carousel",
        JSON.stringify({ cards: [{ title: "a" }, { ...card, buttons: undefined }] }),
      ),
    (error: AppError) =>
      error.message === invalid("carousel", "cards.1.image_url must be an https URL"),
  );
});

Deno.test("buttonsOffered reads a template's quick-reply payloads and nothing else of it", () => {
  const payload = {
    name: "confirm",
    language: "en_US",
    components: [
      { type: "body", parameters: [{ type: "text", text: "x" }] },
      {
        type: "button",
        sub_type: "quick_reply",
        index: "0",
        parameters: [{ type: "payload", payload: "yes" }],
      },
      { type: "button", sub_type: "url", index: "1", parameters: [{ type: "text", text: "path" }] },
      {
        type: "button",
        sub_type: "quick_reply",
        index: "2",
        parameters: [{ type: "payload", payload: " " }],
      },
    ],
  };
  assert.deepEqual(buttonsOffered("template", payload), [{ id: "yes", title: "yes" }]);
  assert.deepEqual(buttonsOffered("template", { name: "x", language: "en" }), []);
  assert.deepEqual(buttonsOffered("template", "not a document"), []);
});

Deno.test("characterCount() counts code points: a surrogate pair is one, a lone half is one", () => {
  assert.equal(characterCount(""), 0);
  assert.equal(characterCount("abc"), 3);
  assert.equal(characterCount("😀😀"), 2);
  assert.equal(characterCount("a😀b"), 3);
  assert.equal(characterCount("\uD83D"), 1);
  assert.equal(characterCount("\uDE00\uD83D"), 2);
  assert.equal(characterCount("\uD83Dx"), 2);
  assert.equal(characterCount("é"), 1);
});

Deno.test("a template quick reply's payload is held to a button id's 256 characters", () => {
  const template = (payload: string) => ({
    name: "order_update",
    language: "en_US",
    components: [{
      type: "button",
      sub_type: "quick_reply",
      index: "0",
      parameters: [{ type: "payload", payload }],
    }],
  });
  assert.equal(TEMPLATE_CONTENT.safeParse(template("x".repeat(256))).success, true);
  const long = TEMPLATE_CONTENT.safeParse(template("x".repeat(257)));
  assert.equal(long.success, false);
  assert.deepEqual(long.error?.issues.map((issue) => [issue.path.join("."), issue.message]), [
    ["components.0.parameters.0.payload", "must be at most 256 characters"],
  ]);
  // One stored before the bound offers no button: no channel could route its click back.
  assert.deepEqual(buttonsOffered("template", template("x".repeat(257))), []);
});
