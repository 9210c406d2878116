import assert from "node:assert/strict";
import { LogLevel, WebClient } from "@slack/web-api";
import { type FakeSlack, startFakeSlack } from "../../../tests/support/fake_slack.ts";
import { createSlackWebClient, slackErrorOf } from "./web_client.ts";

const APP = { clientId: "123.456", clientSecret: "client-secret", signingSecret: "signing-secret" };
const CHANNEL = "C0SUPPORT";
/** For the plain clients built here: the library's own warnings would only clutter the output. */
const QUIET = { logLevel: LogLevel.ERROR };

/** Installs the app into the fake workspace with the official client; answers the bot token. */
async function botToken(slack: FakeSlack): Promise<string> {
  const code = slack.issueCode({ channelId: CHANNEL });
  const access = await new WebClient(undefined, { slackApiUrl: slack.apiUrl, ...QUIET }).oauth.v2
    .access({
      client_id: APP.clientId,
      client_secret: APP.clientSecret,
      code,
    });
  return access.access_token!;
}

/** The error `promise` rejects with. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("expected the call to fail");
}

const RATE_LIMITED = { ok: false, error: "ratelimited" };

Deno.test("createSlackWebClient() posts form-encoded to SLACK_API_URL with the Bearer token", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const client = createSlackWebClient(token, slack.apiUrl);
  const blocks = [{ type: "section", text: { type: "mrkdwn", text: "*Hi*" } }];
  const posted = await client.chat.postMessage({ channel: CHANNEL, text: "Hi", blocks });
  assert.equal(posted.ok, true);
  assert.equal(posted.channel, CHANNEL);
  assert.match(posted.ts ?? "", /^\d{10}\.\d{6}$/);
  const call = slack.calls.at(-1)!;
  assert.equal(call.method, "chat.postMessage");
  assert.equal(call.token, token);
  assert.deepEqual(call.params, { channel: CHANNEL, text: "Hi", blocks });
});

Deno.test("createSlackWebClient() waits out a 429's Retry-After and retries by itself", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("chat.postMessage", {
    status: 429,
    headers: { "retry-after": "1" },
    body: RATE_LIMITED,
  });
  const started = performance.now();
  const posted = await client.chat.postMessage({ channel: CHANNEL, text: "After the pause" });
  assert.ok(performance.now() - started >= 1_000, "the client honoured Retry-After: 1");
  assert.equal(posted.ok, true);
  assert.deepEqual(
    slack.calls.filter((call) => call.method === "chat.postMessage").map((call) =>
      call.params.text
    ),
    ["After the pause", "After the pause"],
  );
});

Deno.test("createSlackWebClient() with rejectRateLimited hands a 429 back at once, with its Retry-After", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl, {
    rejectRateLimited: true,
  });
  slack.queue("chat.postMessage", {
    status: 429,
    headers: { "retry-after": "620" },
    body: RATE_LIMITED,
  });
  const started = performance.now();
  const error = await rejection(client.chat.postMessage({ channel: CHANNEL, text: "Later" }));
  assert.ok(performance.now() - started < 5_000, "not waited out");
  assert.deepEqual(slackErrorOf(error), { code: "ratelimited", retryAfterMs: 620_000 });
  assert.equal(slack.calls.filter((call) => call.method === "chat.postMessage").length, 1);
});

Deno.test("slackErrorOf() reads Slack's error code from a refused call", async () => {
  await using slack = await startFakeSlack(APP);
  const client = createSlackWebClient(await botToken(slack), slack.apiUrl);
  slack.queue("chat.postMessage", { body: { ok: false, error: "channel_not_found" } });
  const error = await rejection(client.chat.postMessage({ channel: "C0GONE", text: "Hi" }));
  assert.deepEqual(slackErrorOf(error), { code: "channel_not_found", retryAfterMs: null });
  assert.equal(
    slack.calls.filter((call) => call.method === "chat.postMessage").length,
    1,
    "no retry",
  );
  const stranger = createSlackWebClient("xoxb-not-issued", slack.apiUrl);
  assert.deepEqual(slackErrorOf(await rejection(stranger.auth.test())), {
    code: "invalid_auth",
    retryAfterMs: null,
  });
});

Deno.test("slackErrorOf() is ratelimited with Retry-After once the client's retries run out", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const limited = { status: 429, headers: { "retry-after": "0" }, body: RATE_LIMITED };
  slack.queue("chat.postMessage", limited, limited, limited);
  const exhausted = await rejection(
    createSlackWebClient(token, slack.apiUrl).chat.postMessage({ channel: CHANNEL, text: "x" }),
  );
  assert.deepEqual(slackErrorOf(exhausted), { code: "ratelimited", retryAfterMs: 0 });
  assert.equal(slack.calls.filter((call) => call.method === "chat.postMessage").length, 3);

  slack.queue("auth.test", { status: 429, headers: { "retry-after": "3" }, body: RATE_LIMITED });
  const rejecting = new WebClient(token, {
    slackApiUrl: slack.apiUrl,
    rejectRateLimitedCalls: true,
    ...QUIET,
  });
  assert.deepEqual(slackErrorOf(await rejection(rejecting.auth.test())), {
    code: "ratelimited",
    retryAfterMs: 3_000,
  });
});

Deno.test("slackErrorOf() tells HTTP errors from unreachable hosts and from non-Slack errors", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await botToken(slack);
  const unavailable = { status: 503, headers: { "retry-after": "7" }, body: "Service Unavailable" };
  slack.queue("auth.test", unavailable, unavailable, unavailable);
  const http = await rejection(createSlackWebClient(token, slack.apiUrl).auth.test());
  assert.deepEqual(slackErrorOf(http), { code: "http_error", retryAfterMs: 7_000 });

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closed = `http://127.0.0.1:${listener.addr.port}/api/`;
  listener.close();
  const unreachable = new WebClient(token, {
    slackApiUrl: closed,
    retryConfig: { retries: 0 },
    ...QUIET,
  });
  assert.deepEqual(slackErrorOf(await rejection(unreachable.auth.test())), {
    code: "request_error",
    retryAfterMs: null,
  });

  assert.deepEqual(slackErrorOf(new TypeError("boom")), {
    code: "unknown_error",
    retryAfterMs: null,
  });
  assert.deepEqual(slackErrorOf("text"), { code: "unknown_error", retryAfterMs: null });
  assert.deepEqual(slackErrorOf(null), { code: "unknown_error", retryAfterMs: null });
});
