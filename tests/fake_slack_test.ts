import assert from "node:assert/strict";
import { isValidSlackRequest } from "../src/channels/slack/signature.ts";
import { type FakeSlack, startFakeSlack } from "./support/fake_slack.ts";

const APP = { clientId: "123.456", clientSecret: "client-secret", signingSecret: "signing-secret" };
const REDIRECT = "http://parley.test/api/v1/slack/callback";

/** Calls a Web API method of the fake as the official client does: a form POST. */
async function call(
  slack: FakeSlack,
  method: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(slack.apiUrl + method, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(params),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Exchanges a fresh code; answers the bot token. */
async function install(slack: FakeSlack): Promise<string> {
  const code = slack.issueCode();
  const { body } = await call(slack, "oauth.v2.access", { code, ...credentials() });
  return body.access_token as string;
}

const credentials = () => ({ client_id: APP.clientId, client_secret: APP.clientSecret });

Deno.test("startFakeSlack() exchanges an issued code once, for the right app and redirect URI", async () => {
  await using slack = await startFakeSlack(APP);
  assert.match(slack.apiUrl, /^http:\/\/127\.0\.0\.1:\d+\/api\/$/);
  const authorize = await fetch(slack.authorizeUrl);
  assert.equal(authorize.status, 200);
  assert.match(await authorize.text(), /<html|<!doctype/i);
  const code = slack.issueCode({ teamId: "T0123", channelId: "C0SUPPORT", redirectUri: REDIRECT });
  const exchange = (params: Record<string, string>, headers: Record<string, string> = {}) =>
    call(slack, "oauth.v2.access", { code, redirect_uri: REDIRECT, ...params }, headers);

  assert.equal(
    (await exchange({ ...credentials(), client_secret: "nope" })).body.error,
    "bad_client_secret",
  );
  assert.equal(
    (await exchange({ ...credentials(), client_id: "9.9" })).body.error,
    "invalid_client_id",
  );
  assert.equal(
    (await exchange({ ...credentials(), redirect_uri: "http://evil.test/" })).body.error,
    "bad_redirect_uri",
  );
  assert.equal((await exchange({ ...credentials(), code: "unknown" })).body.error, "invalid_code");
  const basic = { authorization: `Basic ${btoa(`${APP.clientId}:${APP.clientSecret}`)}` };
  const granted = await exchange({}, basic);
  assert.equal(granted.status, 200);
  assert.equal(granted.headers.get("content-type"), "application/json; charset=utf-8");
  const access = granted.body;
  assert.equal(access.ok, true);
  assert.equal(access.token_type, "bot");
  assert.match(access.access_token as string, /^xoxb-/);
  assert.deepEqual(access.team, { id: "T0123", name: "Fake Workspace" });
  assert.equal((access.incoming_webhook as { channel_id: string }).channel_id, "C0SUPPORT");
  assert.equal(access.bot_user_id, "U0BOT0001");
  assert.equal((await exchange(credentials())).body.error, "code_already_used");

  const token = access.access_token as string;
  const identity = await call(slack, "auth.test", {}, bearer(token));
  assert.deepEqual(
    [identity.body.team_id, identity.body.user_id, identity.body.bot_id],
    ["T0123", "U0BOT0001", "B0BOT0001"],
  );
  assert.equal((await call(slack, "auth.test", { token })).body.ok, true, "token as a parameter");
  assert.deepEqual((await call(slack, "auth.test", {}, bearer("xoxb-other"))).body, {
    ok: false,
    error: "invalid_auth",
  });
  assert.equal((await call(slack, "auth.test", {})).body.error, "not_authed");
  assert.equal(
    (await call(slack, "chat.frobnicate", {}, bearer(token))).body.error,
    "unknown_method",
  );
  assert.deepEqual(slack.calls.at(-4), { method: "auth.test", token, params: {} });
});

Deno.test("startFakeSlack() answers queued responses first, in order, then its defaults", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await install(slack);
  slack.queue(
    "chat.postMessage",
    { status: 429, headers: { "retry-after": "1" }, body: { ok: false, error: "ratelimited" } },
    { body: { ok: false, error: "channel_not_found" } },
  );
  const blocks = [{ type: "section", text: { type: "plain_text", text: "Hi" } }];
  const post = () =>
    call(
      slack,
      "chat.postMessage",
      { channel: "C1", text: "Hi", blocks: JSON.stringify(blocks) },
      bearer(token),
    );
  const limited = await post();
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get("retry-after"), "1");
  assert.deepEqual(limited.body, { ok: false, error: "ratelimited" });
  assert.deepEqual((await post()).body, { ok: false, error: "channel_not_found" });
  const first = (await post()).body;
  const second = (await post()).body;
  assert.equal(first.ok, true);
  assert.match(first.ts as string, /^\d{10}\.\d{6}$/);
  assert.ok((second.ts as string) > (first.ts as string), "ts values increase");
  assert.deepEqual(first.message, {
    type: "message",
    text: "Hi",
    user: "U0BOT0001",
    bot_id: "B0BOT0001",
    app_id: "A0PARLEY01",
    team: "T00000001",
    ts: first.ts,
    blocks,
  });
  assert.deepEqual(slack.calls.at(-1)!.params.blocks, blocks, "JSON-valued form fields are parsed");

  const edit = (method: string, ts: unknown) =>
    call(slack, method, { channel: "C1", ts: String(ts), text: "Edited" }, bearer(token));
  assert.deepEqual((await edit("chat.update", first.ts)).body, {
    ok: true,
    channel: "C1",
    ts: first.ts,
    text: "Edited",
  });
  assert.deepEqual((await edit("chat.delete", first.ts)).body, {
    ok: true,
    channel: "C1",
    ts: first.ts,
  });
  assert.equal((await edit("chat.update", first.ts)).body.error, "message_not_found");
  const join = () => call(slack, "conversations.join", { channel: "C1" }, bearer(token));
  const joined = (await join()).body;
  assert.equal((joined.channel as { id: string }).id, "C1");
  assert.equal(joined.warning, undefined);
  assert.equal((await join()).body.warning, "already_in_channel");
});

Deno.test("startFakeSlack() lists a channel's top-level posts newest first, by page, with their metadata when asked", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await install(slack);
  const metadata = { event_type: "parley_conversation", event_payload: { chat_id: 1 } };
  const posted: string[] = [];
  for (const text of ["one", "two", "three"]) {
    const extra: Record<string, string> = text === "two"
      ? { metadata: JSON.stringify(metadata) }
      : {};
    const { body } = await call(
      slack,
      "chat.postMessage",
      { channel: "C1", text, ...extra },
      bearer(token),
    );
    posted.push(body.ts as string);
  }
  const reply = { channel: "C1", text: "in a thread", thread_ts: posted[0] };
  await call(slack, "chat.postMessage", reply, bearer(token));
  await call(slack, "chat.postMessage", { channel: "C2", text: "elsewhere" }, bearer(token));
  await call(slack, "chat.delete", { channel: "C1", ts: posted[2] }, bearer(token));
  const history = (params: Record<string, string>) =>
    call(slack, "conversations.history", { channel: "C1", ...params }, bearer(token));
  const all = (await history({ include_all_metadata: "true" })).body;
  const listed = all.messages as { text: string; ts: string; metadata?: unknown }[];
  assert.deepEqual(listed.map((post) => post.text), ["two", "one"]);
  assert.deepEqual(listed[0].metadata, metadata);
  assert.equal(all.has_more, false);
  const plain = (await history({})).body.messages as { metadata?: unknown }[];
  assert.equal(plain[0].metadata, undefined, "metadata only when asked");
  const paged = (await history({ limit: "1" })).body;
  assert.equal(paged.has_more, true);
  const cursor = (paged.response_metadata as { next_cursor: string }).next_cursor;
  const next = (await history({ limit: "1", cursor })).body.messages as { text: string }[];
  assert.deepEqual(next.map((post) => post.text), ["one"]);
  const after = (await history({ oldest: posted[0] })).body.messages as { text: string }[];
  assert.deepEqual(after.map((post) => post.text), ["two"]);
  const between = (params: Record<string, string>) =>
    history(params).then(({ body }) => (body.messages as { text: string }[]).map((p) => p.text));
  assert.deepEqual(await between({ oldest: posted[0], latest: posted[1] }), []);
  assert.deepEqual(await between({ oldest: posted[0], latest: posted[1], inclusive: "true" }), [
    "two",
    "one",
  ]);
});

Deno.test("startFakeSlack() acts on a call whose answer it cuts", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await install(slack);
  slack.cutAnswers("chat.postMessage");
  const res = await fetch(slack.apiUrl + "chat.postMessage", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...bearer(token) },
    body: new URLSearchParams({ channel: "C1", text: "cut" }),
  });
  assert.equal(res.status, 200);
  await assert.rejects(res.text());
  const listed = (await call(slack, "conversations.history", { channel: "C1" }, bearer(token)))
    .body.messages as { text: string }[];
  assert.deepEqual(listed.map((post) => post.text), ["cut"]);
  const whole = await call(
    slack,
    "chat.postMessage",
    { channel: "C1", text: "whole" },
    bearer(token),
  );
  assert.equal(whole.body.ok, true, "only the next answer is cut");
});

Deno.test("postEvent() and postAction() send requests that isValidSlackRequest() accepts", async () => {
  await using slack = await startFakeSlack(APP);
  const received: { raw: Uint8Array; headers: Headers }[] = [];
  await using parley = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      received.push({ raw: new Uint8Array(await req.arrayBuffer()), headers: req.headers });
      return new Response("ok");
    },
  );
  const url = `http://127.0.0.1:${parley.addr.port}/api/v1/slack/events`;
  const verified = ({ raw, headers }: { raw: Uint8Array; headers: Headers }) =>
    isValidSlackRequest(raw, {
      timestamp: headers.get("x-slack-request-timestamp"),
      signature: headers.get("x-slack-signature"),
    }, APP.signingSecret);

  const event = {
    type: "event_callback",
    team_id: "T1",
    event_id: "Ev1",
    event: { type: "message", text: "Olá" },
  };
  await (await slack.postEvent(url, event, { retryNum: 1 })).body?.cancel();
  await (await slack.postEvent(url, event, { signingSecret: "wrong" })).body?.cancel();
  await (await slack.postEvent(url, event, { timestamp: Math.floor(Date.now() / 1000) - 600 })).body
    ?.cancel();
  await (await slack.postEvent(url, event, { signature: null })).body?.cancel();
  const action = { type: "block_actions", actions: [{ action_id: "parley_close", value: "7" }] };
  await (await slack.postAction(url, action)).body?.cancel();

  assert.deepEqual(received.map(verified), [true, false, false, false, true]);
  const [retried, , , unsigned, clicked] = received;
  assert.equal(retried.headers.get("content-type"), "application/json");
  assert.deepEqual(JSON.parse(new TextDecoder().decode(retried.raw)), event);
  assert.equal(retried.headers.get("x-slack-retry-num"), "1");
  assert.equal(retried.headers.get("x-slack-retry-reason"), "http_timeout");
  assert.equal(received[1].headers.get("x-slack-retry-num"), null);
  assert.equal(unsigned.headers.get("x-slack-signature"), null);
  assert.equal(clicked.headers.get("content-type"), "application/x-www-form-urlencoded");
  const form = new URLSearchParams(new TextDecoder().decode(clicked.raw));
  assert.deepEqual(JSON.parse(form.get("payload")!), action);
});

Deno.test("startFakeSlack() describes users and files; downloading a file needs a bot token", async () => {
  await using slack = await startFakeSlack(APP);
  const token = await install(slack);
  slack.addUser({ id: "U1", displayName: "Ana" });
  const user = await call(slack, "users.info", { user: "U1" }, bearer(token));
  assert.deepEqual((user.body.user as { profile: unknown }).profile, {
    display_name: "Ana",
    real_name: "Ana",
  });
  assert.equal(
    (await call(slack, "users.info", { user: "U2" }, bearer(token))).body.error,
    "user_not_found",
  );

  const bytes = new TextEncoder().encode("%PDF-1.7 fake");
  slack.addFile({ id: "F1", name: "report.pdf", mimetype: "application/pdf", bytes });
  assert.equal(
    (await call(slack, "files.info", { file: "F2" }, bearer(token))).body.error,
    "file_not_found",
  );
  const info = await call(slack, "files.info", { file: "F1" }, bearer(token));
  const file = info.body.file as { url_private: string; size: number; mimetype: string };
  assert.equal(file.size, bytes.length);
  assert.equal(file.mimetype, "application/pdf");
  assert.ok(file.url_private.startsWith(slack.apiUrl.replace(/api\/$/, "files-pri/")));

  const anonymous = await fetch(file.url_private);
  assert.equal(anonymous.status, 403);
  await anonymous.body?.cancel();
  const stranger = await fetch(file.url_private, { headers: bearer("xoxb-other") });
  assert.equal(stranger.status, 403);
  await stranger.body?.cancel();
  const downloaded = await fetch(file.url_private, { headers: bearer(token) });
  assert.equal(downloaded.status, 200);
  assert.equal(downloaded.headers.get("content-type"), "application/pdf");
  assert.deepEqual(new Uint8Array(await downloaded.arrayBuffer()), bytes);
});
