import assert from "node:assert/strict";
import { MAX_REPLY_CONTEXT, renderReplyContext } from "./slack_reply_context.ts";

Deno.test("renderReplyContext() names the sender and quotes the text on one line", () => {
  const line = renderReplyContext({
    sender: "Bot",
    message_type: "text",
    content: "Shall we ship\n  it <today> & now?",
    payload: null,
  });
  assert.equal(line, "↩ Replying to Bot: “Shall we ship it &lt;today&gt; &amp; now?”");
});

Deno.test("renderReplyContext() cuts the quote at 100 characters between graphemes", () => {
  const family = "👨‍👩‍👧";
  const line = renderReplyContext({
    sender: "Ana",
    message_type: "text",
    content: "a".repeat(98) + family + "tail",
    payload: null,
  });
  // The family does not fit in 99 characters, and is left whole rather than split.
  assert.equal(line, `↩ Replying to Ana: “${"a".repeat(98)}…”`);
});

Deno.test("renderReplyContext() shows a deleted message as such", () => {
  assert.equal(renderReplyContext(null), "↩ Replying to a deleted message");
});

Deno.test("renderReplyContext() quotes media by caption, else by kind, never by link", () => {
  const url = "https://parley.example/media/1";
  const image = (payload: object) =>
    renderReplyContext({ sender: "Ana", message_type: "image", content: "{}", payload });
  assert.equal(image({ url, caption: "the red one" }), "↩ Replying to Ana: “the red one”");
  assert.equal(image({ url }), "↩ Replying to Ana: “[image]”");
});

Deno.test("renderReplyContext() stays within MAX_REPLY_CONTEXT however much it escapes", () => {
  const line = renderReplyContext({
    sender: "&".repeat(500),
    message_type: "text",
    content: "<".repeat(500),
    payload: null,
  });
  assert.ok(line.length <= MAX_REPLY_CONTEXT, `${line.length}`);
});
