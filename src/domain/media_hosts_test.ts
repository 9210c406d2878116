import assert from "node:assert/strict";
import { isMetaMediaHost, isSlackFileHost } from "./media_hosts.ts";

Deno.test("isSlackFileHost() takes Slack's file host over HTTPS, and the configured API's origin", () => {
  const api = "https://slack.com/api";
  assert.equal(isSlackFileHost("https://files.slack.com/files-pri/T1-F1/a.png", api), true);
  assert.equal(isSlackFileHost("https://slack.com/files-pri/T1-F1/a.png", api), true);
  assert.equal(isSlackFileHost("http://files.slack.com/files-pri/T1-F1/a.png", api), false);
  assert.equal(isSlackFileHost("http://slack.com/files-pri/T1-F1/a.png", api), false);
  assert.equal(isSlackFileHost("https://files.slack.com.evil.test/a.png", api), false);
  assert.equal(isSlackFileHost("https://evil.test/a.png", api), false);
  assert.equal(isSlackFileHost("not a url", api), false);
  const fake = "http://127.0.0.1:4100/api";
  assert.equal(isSlackFileHost("http://127.0.0.1:4100/files/F1", fake), true);
  assert.equal(isSlackFileHost("http://127.0.0.1:4101/files/F1", fake), false);
});

Deno.test("isMetaMediaHost() takes Meta's media hosts over HTTPS, and the configured Graph origin", () => {
  const graph = "https://graph.facebook.com/v21.0";
  assert.equal(
    isMetaMediaHost("https://lookaside.fbsbx.com/whatsapp_business/x?mid=1", graph),
    true,
  );
  assert.equal(isMetaMediaHost("https://mmg.whatsapp.net/v/t62/x", graph), true);
  assert.equal(isMetaMediaHost("http://lookaside.fbsbx.com/whatsapp_business/x", graph), false);
  assert.equal(isMetaMediaHost("http://graph.facebook.com/v21.0/x", graph), false);
  assert.equal(isMetaMediaHost("https://lookaside.fbsbx.com:8443/x", graph), false);
  assert.equal(isMetaMediaHost("https://fbsbx.com.evil.test/x", graph), false);
  const fake = "http://127.0.0.1:4200/v21.0";
  assert.equal(isMetaMediaHost("http://127.0.0.1:4200/media/1", fake), true);
  assert.equal(isMetaMediaHost("https://127.0.0.1:4200/media/1", fake), false);
});
