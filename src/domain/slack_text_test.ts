import assert from "node:assert/strict";
import { decodeSlackText, mentionedUsers } from "./slack_text.ts";

const names = { user: (id: string) => ({ U1: "Sam" } as Record<string, string>)[id] };

Deno.test("decodeSlackText() undoes Slack's escapes, &amp; last", () => {
  assert.equal(decodeSlackText("a &lt; b &amp;&amp; c &gt; d", names), "a < b && c > d");
  assert.equal(decodeSlackText("typed &amp;lt; literally", names), "typed &lt; literally");
});

Deno.test("decodeSlackText() shows links, mentions and commands as a reader outside Slack would", () => {
  const cases: [string, string][] = [
    ["see <https://x.io>", "see https://x.io"],
    ["see <https://x.io|the docs>", "see the docs (https://x.io)"],
    ["<https://x.io?a=1&amp;b=2|A &amp; B>", "A & B (https://x.io?a=1&b=2)"],
    ["mail <mailto:a@b.c|a@b.c>", "mail a@b.c"],
    // Words Slack linked by itself read as typed; a link whose label says something else does not.
    [
      "See <http://README.md|README.md> or visit <http://parley.io|parley.io>",
      "See README.md or visit parley.io",
    ],
    ["<https://parley.io/|parley.io>", "parley.io"],
    ["<http://parley.io|evil.io>", "evil.io (http://parley.io)"],
    ["<http://parley.io/x|parley.io>", "parley.io (http://parley.io/x)"],
    ["hi <@U1>", "hi @Sam"],
    ["hi <@U9>", "hi @U9"],
    ["hi <@U9|kim>", "hi @kim"],
    ["in <#C1|general>", "in #general"],
    ["in <#C1>", "in #C1"],
    ["<!here> and <!channel>", "@here and @channel"],
    ["<!subteam^S1|@support>", "@support"],
    ["<!date^1392734382^{date}|Feb 18, 2014>", "Feb 18, 2014"],
    ["plain text", "plain text"],
  ];
  for (const [text, shown] of cases) assert.equal(decodeSlackText(text, names), shown, text);
});

Deno.test("mentionedUsers() lists each mentioned member once", () => {
  assert.deepEqual(mentionedUsers("<@U1> <@U2|x> <@U1> <#C1> <!here>"), ["U1", "U2"]);
});
