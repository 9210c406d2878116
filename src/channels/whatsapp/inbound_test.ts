import assert from "node:assert/strict";
import { type InboundItem, MAX_ID_LENGTH, parseWhatsAppWebhook } from "./inbound.ts";

// Meta's samples, byte for byte as in /work/shared/fixtures/whatsapp (kept here so the test stands alone).
const INBOUND_TEXT =
  '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Sheena Nelson"},"wa_id":"16505551234"}],"messages":[{"from":"16505551234","id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=","timestamp":"1749416383","type":"text","text":{"body":"Does it come in another color?"}}]},"field":"messages"}]}]}';
const INBOUND_BUTTON_REPLY =
  '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Pablo Morales"},"wa_id":"16505551234"}],"messages":[{"context":{"from":"15550783881","id":"wamid.HBgLMTY0NjcwNDM1OTUVAgARGBJBM0Y4RUU0RUNFQkFDMjYzQUMA"},"from":"16505551234","id":"wamid.HBgLMTY0NjcwNDM1OTUVAgASGBQzQThBREYwNzc2RDc2QjA1QTIwMgA=","timestamp":"1714510003","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"change-button","title":"Change"}}}]},"field":"messages"}]}]}';
const STATUS_FAILED =
  '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"statuses":[{"id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0QUQ2MjA4NEYyRkExNjMyREUA","status":"failed","timestamp":"1751142888","recipient_id":"16505551234","errors":[{"code":131049,"title":"This message was not delivered to maintain healthy ecosystem engagement.","message":"This message was not delivered to maintain healthy ecosystem engagement.","error_data":{"details":"In order to maintain a healthy ecosystem engagement, the message failed to be delivered."},"href":"/documentation/business-messaging/whatsapp/support/error-codes"}]}]},"field":"messages"}]}]}';

const PHONE_NUMBER_ID = "106540352242922";
const WA_ID = "16505551234";
const SENT_AT = "1739321024";
const SENT_AT_ISO = "2025-02-12T00:43:44.000Z";
const CUSTOMER = { waId: WA_ID, userId: null, name: "Sheena Nelson" };

/** The `value` of a `messages` change, as Meta sends it. */
function changeValue(parts: { messages?: unknown[]; statuses?: unknown[]; waId?: string }) {
  const contacts = parts.messages ? [{ profile: { name: "Sheena Nelson" }, wa_id: WA_ID }] : [];
  return {
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: PHONE_NUMBER_ID },
    ...(contacts.length > 0 ? { contacts } : {}),
    ...parts,
  };
}

/** A webhook body with one entry per element of `entries`, each holding those change values. */
function webhook(...entries: object[][]): unknown {
  return {
    object: "whatsapp_business_account",
    entry: entries.map((values) => ({
      id: "102290129340398",
      changes: values.map((value) => ({ value, field: "messages" })),
    })),
  };
}

/** A customer's message of `type` with its own object (and any other fields). */
function message(type: string, fields: object, id = "wamid.IN1"): object {
  return { from: WA_ID, id, timestamp: SENT_AT, type, ...fields };
}

/** A text message whose id and text are `id`. */
function text(id: string): object {
  return message("text", { text: { body: id } }, id);
}

/** A status update of the message `id`. */
function status(id: string, state = "delivered", fields: object = {}): object {
  return { id, status: state, timestamp: SENT_AT, recipient_id: WA_ID, ...fields };
}

/** The one item parsed from a body holding `raw` alone, asserting nothing was skipped. */
function onlyItem(raw: object): InboundItem {
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ messages: [raw] })]));
  assert.deepEqual(parsed.skipped, []);
  assert.equal(parsed.items.length, 1);
  return parsed.items[0];
}

/** The content of the one message parsed from a body holding `raw` alone. */
function onlyContent(raw: object) {
  const item = onlyItem(raw);
  assert.equal(item.kind, "message");
  return item.content;
}

Deno.test("parseWhatsAppWebhook() reads Meta's text message sample", () => {
  assert.deepEqual(parseWhatsAppWebhook(JSON.parse(INBOUND_TEXT)), {
    items: [{
      kind: "message",
      phoneNumberId: PHONE_NUMBER_ID,
      customer: CUSTOMER,
      wamid: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
      timestamp: "2025-06-08T20:59:43.000Z",
      content: { messageType: "text", text: "Does it come in another color?" },
      replyToWamid: null,
      referral: null,
    }],
    skipped: [],
  });
});

Deno.test("parseWhatsAppWebhook() reads a body that also carries a field nested 20,000 deep", () => {
  const body = JSON.parse(INBOUND_TEXT);
  body.extra = JSON.parse("[".repeat(20_000) + "]".repeat(20_000));
  const parsed = parseWhatsAppWebhook(body);
  assert.equal(parsed.items.length, 1);
  assert.equal(parsed.items[0].kind, "message");
});

Deno.test("parseWhatsAppWebhook() reads Meta's reply button sample as a click", () => {
  assert.deepEqual(parseWhatsAppWebhook(JSON.parse(INBOUND_BUTTON_REPLY)), {
    items: [{
      kind: "click",
      phoneNumberId: PHONE_NUMBER_ID,
      customer: { waId: WA_ID, userId: null, name: "Pablo Morales" },
      wamid: "wamid.HBgLMTY0NjcwNDM1OTUVAgASGBQzQThBREYwNzc2RDc2QjA1QTIwMgA=",
      timestamp: "2024-04-30T20:46:43.000Z",
      contextWamid: "wamid.HBgLMTY0NjcwNDM1OTUVAgARGBJBM0Y4RUU0RUNFQkFDMjYzQUMA",
      replyId: "change-button",
      title: "Change",
    }],
    skipped: [],
  });
});

Deno.test("parseWhatsAppWebhook() reads Meta's failed status sample with its error", () => {
  const title = "This message was not delivered to maintain healthy ecosystem engagement.";
  assert.deepEqual(parseWhatsAppWebhook(JSON.parse(STATUS_FAILED)), {
    items: [{
      kind: "status",
      phoneNumberId: PHONE_NUMBER_ID,
      wamid: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0QUQ2MjA4NEYyRkExNjMyREUA",
      status: "failed",
      timestamp: "2025-06-28T20:34:48.000Z",
      recipientId: WA_ID,
      error: { code: 131049, title },
    }],
    skipped: [],
  });
});

Deno.test("parseWhatsAppWebhook() keeps a failed status whose error code is no 32-bit integer, without the error", () => {
  const parsed = parseWhatsAppWebhook(JSON.parse(STATUS_FAILED.replace("131049", "3000000000")));
  assert.equal(parsed.items.length, 1);
  const [item] = parsed.items;
  assert.deepEqual(item.kind === "status" && [item.status, item.error], ["failed", null]);
  const fraction = parseWhatsAppWebhook(JSON.parse(STATUS_FAILED.replace("131049", "1.5")));
  assert.deepEqual(fraction.items[0].kind === "status" && fraction.items[0].error, null);
});

Deno.test("parseWhatsAppWebhook() reads images and stickers as image, the rest as file", () => {
  const sha256 = "81d3bd8a8db4868c9520ed47186e8b7c5789e61ff79f7f834be6950b808a90d3";
  const cases: [string, object, string, object][] = [
    ["image", { caption: "This one?", mime_type: "image/jpeg", sha256, id: "1" }, "image", {
      caption: "This one?",
    }],
    ["sticker", { mime_type: "image/webp", sha256, id: "1", animated: true }, "image", {}],
    ["audio", { mime_type: "audio/ogg; codecs=opus", sha256, id: "1", voice: true }, "file", {}],
    ["video", { caption: "Unboxing", mime_type: "video/mp4", sha256, id: "1" }, "file", {
      caption: "Unboxing",
    }],
    [
      "document",
      {
        caption: "My invoice",
        filename: "invoice-0042.pdf",
        mime_type: "application/pdf",
        sha256,
        id: "1",
      },
      "file",
      { caption: "My invoice", filename: "invoice-0042.pdf" },
    ],
  ];
  for (const [kind, object, messageType, shown] of cases) {
    const mimeType = (object as { mime_type: string }).mime_type;
    assert.deepEqual(onlyContent(message(kind, { [kind]: object })), {
      messageType,
      media: { id: "1", mimeType, kind, caption: null, filename: null, ...shown },
    });
  }
  const image = { id: "2", caption: "  " };
  assert.deepEqual(onlyContent(message("image", { image })), {
    messageType: "image",
    media: { id: "2", mimeType: null, kind: "image", caption: null, filename: null },
  });
});

Deno.test("parseWhatsAppWebhook() renders a location as text with a map link", () => {
  const location = {
    address: "101 Forest Ave, Palo Alto, CA 94301",
    latitude: 37.44221496582,
    longitude: -122.16167449951,
    name: "Philz Coffee",
    url: "https://philzcoffee.com",
  };
  assert.deepEqual(onlyContent(message("location", { location })), {
    messageType: "text",
    text:
      "📍 Philz Coffee, 101 Forest Ave, Palo Alto, CA 94301 (37.44221496582, -122.16167449951) " +
      "https://maps.google.com/?q=37.44221496582,-122.16167449951\nhttps://philzcoffee.com",
  });
  assert.deepEqual(
    onlyContent(message("location", { location: { latitude: 1.5, longitude: 2 } })),
    {
      messageType: "text",
      text: "📍 (1.5, 2) https://maps.google.com/?q=1.5,2",
    },
  );
});

Deno.test("parseWhatsAppWebhook() renders a WhatsApp Flow's answers one field a line, without its token", () => {
  const reply = (response_json: string) =>
    message("interactive", {
      context: { from: "15550783881", id: "wamid.OUTFLOW" },
      interactive: { type: "nfm_reply", nfm_reply: { name: "flow", body: "Sent", response_json } },
    });
  const answers = '{"flow_token":"t1","email":"kerry@example.com","date":"2026-12-01","count":2}';
  assert.deepEqual(onlyContent(reply(answers)), {
    messageType: "text",
    text: "email: kerry@example.com\ndate: 2026-12-01\ncount: 2",
  });
  assert.deepEqual(onlyContent(reply("not json")), { messageType: "text", text: "not json" });
  assert.deepEqual(onlyContent(reply('{"flow_token":"t1"}')), {
    messageType: "text",
    text: "(empty form)",
  });
});

Deno.test("parseWhatsAppWebhook() renders an order with its note and one line per item", () => {
  const order = {
    catalog_id: "194836987003835",
    text: "Please deliver after 5pm",
    product_items: [
      { product_retailer_id: "di9ozbzfi4", quantity: 2, item_price: 30, currency: "USD" },
      { product_retailer_id: "nlg9qfpx3a", quantity: "1", item_price: "12.5", currency: "USD" },
    ],
  };
  assert.deepEqual(onlyContent(message("order", { order })), {
    messageType: "text",
    text: "🛒 Order\nPlease deliver after 5pm\ndi9ozbzfi4 × 2 @ 30 USD\nnlg9qfpx3a × 1 @ 12.5 USD",
  });
  assert.deepEqual(onlyContent(message("order", { order: { catalog_id: "1" } })), {
    messageType: "text",
    text: "🛒 Order",
  });
});

Deno.test("parseWhatsAppWebhook() renders shared contacts as one line each", () => {
  const contacts = [
    {
      name: { formatted_name: "Barbara J. Johnson", first_name: "Barbara", last_name: "Johnson" },
      phones: [
        { phone: "+1 (650) 555-1234", type: "WORK", wa_id: "16505551234" },
        { phone: "+1 (940) 555-1234", type: "HOME" },
      ],
      emails: [{ email: "bjohnson@example.com", type: "WORK" }],
    },
    { name: { first_name: "Ana", last_name: "Lima" }, phones: [{ wa_id: "5511999999999" }] },
  ];
  assert.deepEqual(onlyContent(message("contacts", { contacts })), {
    messageType: "text",
    text:
      "👤 Barbara J. Johnson, +1 (650) 555-1234, +1 (940) 555-1234\n👤 Ana Lima, +5511999999999",
  });
});

Deno.test("parseWhatsAppWebhook() renders a reaction and its removal as text", () => {
  for (
    const [emoji, text] of [["👍", "Reacted 👍 to a message"], [undefined, "Removed a reaction"]]
  ) {
    const reaction = { message_id: "wamid.OUT1", emoji };
    assert.deepEqual(onlyContent(message("reaction", { reaction })), { messageType: "text", text });
  }
});

Deno.test("parseWhatsAppWebhook() reads list replies and template quick replies as clicks", () => {
  const context = { from: "15550783881", id: "wamid.OUT2" };
  const list_reply = {
    id: "priority_express",
    title: "Priority Mail Express",
    description: "1-2 days",
  };
  const listItem = onlyItem(
    message("interactive", { context, interactive: { type: "list_reply", list_reply } }),
  );
  assert.deepEqual(listItem, {
    kind: "click",
    phoneNumberId: PHONE_NUMBER_ID,
    customer: CUSTOMER,
    wamid: "wamid.IN1",
    timestamp: SENT_AT_ISO,
    contextWamid: "wamid.OUT2",
    replyId: "priority_express",
    title: "Priority Mail Express",
  });
  const button = { payload: "unsubscribe_promo", text: "Unsubscribe" };
  const buttonItem = onlyItem(message("button", { context, button }));
  assert.equal(buttonItem.kind, "click");
  assert.equal(buttonItem.replyId, "unsubscribe_promo");
  assert.equal(buttonItem.title, "Unsubscribe");
  assert.equal(buttonItem.contextWamid, "wamid.OUT2");
  const noContext = onlyItem(message("button", { button }));
  assert.equal(noContext.kind === "click" && noContext.contextWamid, null);
});

Deno.test("parseWhatsAppWebhook() names the message a reply of any kind quotes, and none otherwise", () => {
  const context = { from: "15550783881", id: "wamid.OUT3" };
  const location = { latitude: 1, longitude: 2 };
  const media = { mime_type: "image/jpeg", id: "1" };
  const replies = [
    message("text", { context, text: { body: "yes" } }),
    message("image", { context, image: media }),
    message("location", { context, location }),
    message("reaction", { context, reaction: { message_id: "wamid.OUT3", emoji: "👍" } }),
    message("unknown_kind", { context }),
  ];
  for (const raw of replies) {
    const item = onlyItem(raw);
    assert.equal(item.kind === "message" && item.replyToWamid, "wamid.OUT3");
  }
  // A forwarded message carries a context without an id; an empty id names nothing.
  const unquoted = [
    message("text", { text: { body: "hi" } }),
    message("text", { context: { forwarded: true }, text: { body: "fwd" } }),
    message("text", { context: { from: "15550783881", id: "" }, text: { body: "x" } }),
  ];
  for (const raw of unquoted) {
    const item = onlyItem(raw);
    assert.equal(item.kind === "message" && item.replyToWamid, null);
  }
});

Deno.test("parseWhatsAppWebhook() keeps the ad a customer came from, on a message of any kind", () => {
  // Meta's referral of a message sent from a Click-to-WhatsApp ad.
  const referral = {
    source_url: "https://fb.me/2ZulEu42P",
    source_id: "120226305854810726",
    source_type: "ad",
    headline: "Chat with us",
    body: "Summer sale",
    media_type: "image",
    image_url: "https://scontent.xx.fbcdn.net/ad.png",
    ctwa_clid: "ARAkLkA8rmlFeiCktEJQ",
  };
  for (
    const raw of [
      message("text", { referral, text: { body: "Is this still on?" } }),
      message("image", { referral, image: { mime_type: "image/jpeg", id: "1" } }),
    ]
  ) {
    const item = onlyItem(raw);
    assert.deepEqual(item.kind === "message" && item.referral, referral);
  }
  const plain = onlyItem(message("text", { referral: "ad", text: { body: "hi" } }));
  assert.equal(plain.kind === "message" && plain.referral, null);
});

Deno.test("parseWhatsAppWebhook() renders unsupported and unknown types as text", () => {
  const errors = [{
    code: 131051,
    title: "Message type unknown",
    message: "Message type unknown",
    error_data: { details: "Message type is currently not supported." },
  }];
  const cases: [object, string][] = [
    [
      message("unsupported", { errors, unsupported: { type: "poll_update" } }),
      "[Unsupported message type: poll_update (Message type unknown)]",
    ],
    [message("unsupported", { unsupported: {} }), "[Unsupported message type: unsupported]"],
    [message("unknown", { errors }), "[Unsupported message type: unknown (Message type unknown)]"],
    [
      message("interactive", { interactive: { type: "call_permission_reply" } }),
      "[Unsupported message type: interactive call_permission_reply]",
    ],
  ];
  for (const [raw, text] of cases) {
    assert.deepEqual(onlyContent(raw), { messageType: "text", text });
  }
});

Deno.test("parseWhatsAppWebhook() reads sent, delivered and read statuses without an error", () => {
  const conversation = { id: "a75d17ad", origin: { type: "service" } };
  const pricing = { billable: true, pricing_model: "PMP", category: "service", type: "regular" };
  const statuses = ["sent", "delivered", "read"].map((state, i) =>
    status("wamid.OUT3", state, { timestamp: String(Number(SENT_AT) + i), conversation, pricing })
  );
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ statuses })]));
  assert.deepEqual(parsed.skipped, []);
  assert.deepEqual(
    parsed.items.map((item) => item.kind === "status" && [item.status, item.timestamp, item.error]),
    [
      ["sent", "2025-02-12T00:43:44.000Z", null],
      ["delivered", "2025-02-12T00:43:45.000Z", null],
      ["read", "2025-02-12T00:43:46.000Z", null],
    ],
  );
});

Deno.test("parseWhatsAppWebhook() keeps body order across entries and changes", () => {
  const body = webhook(
    [
      changeValue({ messages: [text("m1"), text("m2")] }),
      changeValue({ statuses: [status("s1")] }),
    ],
    [changeValue({ messages: [text("m3")], statuses: [status("s2")] })],
  );
  const parsed = parseWhatsAppWebhook(body);
  assert.deepEqual(parsed.skipped, []);
  assert.deepEqual(parsed.items.map((item) => `${item.kind}:${item.wamid}`), [
    "message:m1",
    "message:m2",
    "status:s1",
    "message:m3",
    "status:s2",
  ]);
});

Deno.test("parseWhatsAppWebhook() skips a malformed message and keeps the others", () => {
  const messages = [
    text("m1"),
    message("text", { text: {} }, "m2"),
    { ...text("m3"), timestamp: "yesterday" },
    message("image", { image: { mime_type: "image/png" } }, "m4"),
    "not a message",
    text("m6"),
  ];
  const parsed = parseWhatsAppWebhook(webhook([], [changeValue({ messages })]));
  assert.deepEqual(parsed.items.map((item) => item.wamid), ["m1", "m6"]);
  assert.deepEqual(parsed.skipped, [
    { path: "entry.1.changes.0.value.messages.1", reason: "text.body is required" },
    {
      path: "entry.1.changes.0.value.messages.2",
      reason: 'timestamp "yesterday" is not Unix seconds',
    },
    { path: "entry.1.changes.0.value.messages.3", reason: "image.id is required" },
    { path: "entry.1.changes.0.value.messages.4", reason: "message must be an object" },
  ]);
});

Deno.test("parseWhatsAppWebhook() skips a part whose id is longer than any Meta gives, and keeps the rest", () => {
  const long = (prefix: string) => prefix + "9".repeat(MAX_ID_LENGTH + 1 - prefix.length);
  const messages = [
    text("m1"),
    text(long("wamid.")),
    { ...text("m3"), from: long("") },
    message("image", { image: { id: long("") } }, "m4"),
    message("system", { system: { type: "user_changed_number", wa_id: long("") } }, "m5"),
    text("m6"),
    text("9".repeat(MAX_ID_LENGTH)),
  ];
  const statuses = [status(long("wamid.")), status("wamid.OUT")];
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ messages, statuses })]));
  assert.deepEqual(parsed.items.map((item) => item.wamid), [
    "m1",
    "m6",
    "9".repeat(MAX_ID_LENGTH),
    "wamid.OUT",
  ]);
  const path = "entry.0.changes.0.value";
  assert.deepEqual(parsed.skipped.map((part) => part.path), [
    `${path}.messages.1`,
    `${path}.messages.2`,
    `${path}.messages.3`,
    `${path}.messages.4`,
    `${path}.statuses.0`,
  ]);
  for (const { reason } of parsed.skipped) assert.match(reason, /at most 256/);
});

Deno.test("parseWhatsAppWebhook() gives a customer without a contacts entry no name", () => {
  const value = {
    ...changeValue({ messages: [message("text", { text: { body: "hi" } })] }),
    contacts: [],
  };
  const [item] = parseWhatsAppWebhook(webhook([value])).items;
  assert.deepEqual(item.kind === "message" && item.customer, {
    waId: WA_ID,
    userId: null,
    name: null,
  });
});

const BSUID = "US.13491208655302741918";

Deno.test("parseWhatsAppWebhook() reads a username user's message, named only by from_user_id", () => {
  const value = changeValue({
    messages: [{
      from_user_id: BSUID,
      id: "wamid.BSUID1",
      timestamp: SENT_AT,
      type: "text",
      text: { body: "Where is my order?" },
    }],
  });
  value.contacts = [{ profile: { name: "Maria", username: "@maria" }, user_id: BSUID }] as never;
  const parsed = parseWhatsAppWebhook(webhook([value]));
  assert.deepEqual(parsed.skipped, []);
  assert.deepEqual(parsed.items.map((item) => item.kind === "message" && item.customer), [
    { waId: null, userId: BSUID, name: "Maria" },
  ]);
});

Deno.test("parseWhatsAppWebhook() keeps both ids of a user who shares their phone number", () => {
  const value = changeValue({
    messages: [
      { ...message("text", { text: { body: "a" } }, "m1"), from_user_id: BSUID },
      // Only the contacts entry names the BSUID of this one.
      message("text", { text: { body: "b" } }, "m2"),
    ],
  });
  value.contacts = [{ profile: { name: "Sheena Nelson" }, wa_id: WA_ID, user_id: BSUID }] as never;
  const parsed = parseWhatsAppWebhook(webhook([value]));
  assert.deepEqual(parsed.items.map((item) => item.kind === "message" && item.customer), [
    { waId: WA_ID, userId: BSUID, name: "Sheena Nelson" },
    { waId: WA_ID, userId: BSUID, name: "Sheena Nelson" },
  ]);
});

Deno.test("parseWhatsAppWebhook() skips a message naming no user, and reads a status's BSUID", () => {
  const { from: _, ...anonymous } = message("text", { text: { body: "hi" } }) as { from: string };
  const { recipient_id: __, ...toUser } = status("wamid.OUT1") as { recipient_id: string };
  const parsed = parseWhatsAppWebhook(webhook([changeValue({
    messages: [anonymous],
    statuses: [{ ...toUser, recipient_user_id: BSUID }],
  })]));
  assert.deepEqual(parsed.skipped, [{
    path: "entry.0.changes.0.value.messages.0",
    reason: "from or from_user_id is required",
  }]);
  assert.deepEqual(parsed.items.map((item) => item.kind === "status" && item.recipientId), [BSUID]);
});

Deno.test("parseWhatsAppWebhook() reads a changed number or BSUID as the customer's new ids, not their words", () => {
  const system = (fields: object) => message("system", { system: fields });
  const value = changeValue({
    messages: [
      system({
        body: `User Kerry changed from ${WA_ID} to 16505559999`,
        wa_id: "16505559999",
        type: "user_changed_number",
      }),
      {
        ...system({ type: "user_changed_user_id", user_id: "US.2", previous_user_id: "US.1" }),
        from: undefined,
      },
      system({ body: "Something else", type: "customer_identity_changed" }),
    ],
  });
  delete value.contacts; // Meta sends none with system messages.
  const parsed = parseWhatsAppWebhook(webhook([value]));
  assert.deepEqual(
    parsed.items.map((item) =>
      item.kind === "identity" && [item.customer, item.newWaId, item.newUserId]
    ),
    [
      [{ waId: WA_ID, userId: null, name: null }, "16505559999", null],
      [{ waId: null, userId: "US.1", name: null }, null, "US.2"],
    ],
  );
  assert.deepEqual(parsed.skipped, [{
    path: "entry.0.changes.0.value.messages.2",
    reason: 'system message "customer_identity_changed" is not handled',
  }]);
});

Deno.test("parseWhatsAppWebhook() skips untracked statuses, other fields and reported errors", () => {
  const played = status("wamid.OUT4", "played");
  const value = {
    ...changeValue({ statuses: [played] }),
    errors: [{ code: 131000, title: "Something went wrong" }],
  };
  const body = webhook([value]) as { entry: { changes: object[] }[] };
  body.entry[0].changes.push({ field: "account_update", value: {} }, {
    field: "messages",
    value: {},
  });
  assert.deepEqual(parseWhatsAppWebhook(body), {
    items: [],
    skipped: [
      {
        path: "entry.0.changes.0.value.statuses.0",
        reason: "status must be one of: sent, delivered, read, failed",
      },
      {
        path: "entry.0.changes.0.value.errors.0",
        reason: "Meta reported error 131000: Something went wrong",
      },
      { path: "entry.0.changes.1", reason: 'field "account_update" is not handled' },
      { path: "entry.0.changes.2", reason: "value.metadata is required" },
    ],
  });
});

Deno.test("parseWhatsAppWebhook() skips a body of another object", () => {
  const body = {
    object: "page",
    entry: [{ id: "1", changes: [{ field: "messages", value: changeValue({}) }] }],
  };
  assert.deepEqual(parseWhatsAppWebhook(body), {
    items: [],
    skipped: [{ path: "", reason: "object must be one of: whatsapp_business_account" }],
  });
});

Deno.test("parseWhatsAppWebhook() skips input that is not an object", () => {
  for (const body of [null, undefined, "text", 42, [], [webhook([])]]) {
    const parsed = parseWhatsAppWebhook(body);
    assert.deepEqual(parsed.items, []);
    assert.equal(parsed.skipped.length, 1);
    assert.equal(parsed.skipped[0].path, "");
  }
  assert.deepEqual(
    parseWhatsAppWebhook({ object: "whatsapp_business_account", entry: [7] }).skipped,
    [
      { path: "entry.0", reason: "entry must be an object" },
    ],
  );
});

Deno.test("parseWhatsAppWebhook() reads a batch of 1,000 messages in order", () => {
  const messages = Array.from({ length: 1000 }, (_, i) => text(`wamid.${i}`));
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ messages })]));
  assert.deepEqual(parsed.skipped, []);
  assert.equal(parsed.items.length, 1000);
  parsed.items.forEach((item, i) => {
    assert.equal(item.wamid, `wamid.${i}`);
    assert.deepEqual(item.kind === "message" && item.content, {
      messageType: "text",
      text: `wamid.${i}`,
    });
  });
});

Deno.test("parseWhatsAppWebhook() drops NUL characters, which PostgreSQL cannot store", () => {
  const image = { id: "7", caption: "a\u0000b" };
  assert.deepEqual(onlyContent(message("text", { text: { body: "hi\u0000 there" } })), {
    messageType: "text",
    text: "hi there",
  });
  const content = onlyContent(message("image", { image }));
  assert.equal(content.messageType === "image" && content.media.caption, "ab");
});

Deno.test("parseWhatsAppWebhook() drops NUL from ids too, and skips an id of nothing else", () => {
  const messages = [
    { ...text("m\u00001"), from: `${WA_ID}\u0000` },
    message("button", { button: { payload: "p\u0000", text: "Yes\u0000" } }, "m2"),
    text("\u0000"),
  ];
  const statuses = [status("s\u00001", "failed", { errors: [{ code: 1, title: "t\u0000" }] })];
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ messages, statuses })]));
  assert.deepEqual(parsed.items.map((item) => item.wamid), ["m1", "m2", "s1"]);
  const [first, click, failed] = parsed.items;
  assert.equal(first.kind === "message" && first.customer.waId, WA_ID);
  assert.deepEqual(click.kind === "click" && [click.replyId, click.title], ["p", "Yes"]);
  assert.deepEqual(failed.kind === "status" && failed.error, { code: 1, title: "t" });
  assert.deepEqual(parsed.skipped, [
    {
      path: "entry.0.changes.0.value.messages.2",
      reason: "id Too small: expected string to have >=1 characters",
    },
  ]);
});

Deno.test("parseWhatsAppWebhook() reads a lone surrogate as U+FFFD, as PostgreSQL will store it", () => {
  const messages = [
    { ...text("m\ud8001"), from: `${WA_ID}\udc00` },
    message(
      "image",
      { image: { id: "7", mime_type: "image/png\ud800", caption: "a\udfffb" } },
      "m2",
    ),
  ];
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ messages })]));
  assert.deepEqual(parsed.skipped, []);
  const [first, image] = parsed.items;
  assert.equal(first.wamid, "m\uFFFD1");
  assert.equal(first.kind === "message" && first.customer.waId, `${WA_ID}\uFFFD`);
  assert.deepEqual(image.kind === "message" && image.content, {
    messageType: "image",
    media: {
      id: "7",
      mimeType: "image/png\uFFFD",
      kind: "image",
      caption: "a\uFFFDb",
      filename: null,
    },
  });
});

Deno.test("parseWhatsAppWebhook() skips a timestamp past year 9999, which has no ISO 8601 form", () => {
  const messages = [{ ...text("m1"), timestamp: "8640000000000" }, {
    ...text("m2"),
    timestamp: 253402300799,
  }];
  const parsed = parseWhatsAppWebhook(webhook([changeValue({ messages })]));
  assert.deepEqual(parsed.items.map((item) => [item.wamid, item.timestamp]), [
    ["m2", "9999-12-31T23:59:59.000Z"],
  ]);
  assert.deepEqual(parsed.skipped, [{
    path: "entry.0.changes.0.value.messages.0",
    reason: 'timestamp "8640000000000" is not Unix seconds',
  }]);
});
