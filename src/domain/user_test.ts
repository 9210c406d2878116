import assert from "node:assert/strict";
import { checkPassword, emailKey, parseEmail, parseRole } from "./user.ts";

Deno.test("parseEmail trims and accepts local@domain", () => {
  assert.equal(parseEmail("  Agent.One+x@Example.co.uk "), "Agent.One+x@Example.co.uk");
  assert.equal(parseEmail("zoë@bücher.de"), "zoë@bücher.de");
});

Deno.test("parseEmail refuses what is not an address", () => {
  for (
    const text of [
      "",
      "agent",
      "agent@",
      "@example.com",
      "a@b",
      "a@@b.com",
      "a b@example.com",
      "a@example..com",
      "a@example.com.",
      "a\u0000@example.com",
      "agent\u200b@example.com",
      "agent@exa\u00admple.com",
      `${"x".repeat(65)}@example.com`,
      `a@${"x".repeat(250)}.com`,
    ]
  ) {
    assert.throws(() => parseEmail(text), /is not an email address/, JSON.stringify(text));
  }
});

Deno.test("parseEmail stores the composed form", () => {
  assert.equal(parseEmail("e\u0301lodie@example.com"), "\u00e9lodie@example.com");
});

Deno.test("emailKey makes case and Unicode spelling variants one address", () => {
  const key = emailKey("élodie@exämple.com");
  assert.equal(emailKey("ÉLODIE@EXÄMPLE.COM"), key);
  assert.equal(emailKey("E\u0301LODIE@EXA\u0308MPLE.COM"), key);
  assert.equal(emailKey("ΣΟΦΙΑ@example.com"), emailKey("σοφια@example.com"));
  assert.equal(emailKey("Agent@Example.com"), "agent@example.com");
  assert.notEqual(emailKey("agent1@example.com"), emailKey("agent2@example.com"));
});

Deno.test("checkPassword counts characters, not bytes", () => {
  assert.throws(() => checkPassword("short12"), /at least 8 characters/);
  assert.doesNotThrow(() => checkPassword("longer12"));
  assert.throws(() => checkPassword("😀".repeat(7)), /at least 8/);
  assert.doesNotThrow(() => checkPassword("😀".repeat(8)));
  assert.throws(() => checkPassword("x".repeat(1025)), /at most 1024/);
});

Deno.test("parseRole takes admin or agent only", () => {
  assert.equal(parseRole("admin"), "admin");
  assert.equal(parseRole("agent"), "agent");
  assert.throws(() => parseRole("Admin"), /one of: admin, agent/);
  assert.throws(() => parseRole("owner"), /one of: admin, agent/);
});
