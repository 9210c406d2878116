import assert from "node:assert/strict";
import { createTestDatabase, type TestDatabase } from "./support/database.ts";
import { startTestServer, type TestServer } from "./support/server.ts";
import { apiCall, createKeyedApp, createVisitorChat, type KeyedApp } from "./support/open_api.ts";
import type { FakeSlack, FakeSlackInstall } from "./support/fake_slack.ts";
import {
  installLink,
  installSlack,
  slackServerEnv,
  startTestSlack,
  TEST_SLACK,
  TEST_WORKSPACE,
} from "./support/slack_workspace.ts";
import { waitUntil } from "./support/realtime.ts";
import { eventually } from "./support/eventually.ts";
import { firstAnswer } from "./support/raw_http.ts";
import { createSlackInboundProcessor } from "../src/channels/slack/inbound_processor.ts";
import { createMediaLinks } from "../src/channels/media_links.ts";
import { UNAVAILABLE } from "../src/actors/commit_loop.ts";
import type { AppCommand, CommandResult } from "../src/actors/protocol.ts";

const { clientId: CLIENT_ID, signingSecret: SIGNING_SECRET } = TEST_SLACK;
const { teamId: TEAM, channelId: CHANNEL } = TEST_WORKSPACE;

interface Env extends AsyncDisposable {
  db: TestDatabase;
  slack: FakeSlack;
  server: TestServer;
  app: KeyedApp;
}

async function setUp(options: { signingSecret?: string | null } = {}): Promise<Env> {
  const db = await createTestDatabase();
  const slack = await startTestSlack();
  const signing = options.signingSecret === undefined ? SIGNING_SECRET : options.signingSecret;
  const server = await startTestServer(db.url, slackServerEnv(slack, signing));
  const app = await createKeyedApp(db.sql);
  return {
    db,
    slack,
    server,
    app,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]();
      await slack[Symbol.asyncDispose]();
      await db[Symbol.asyncDispose]();
    },
  };
}

/** Starts an install: the redirect's state and the cookie it set. */
async function begin(env: Env): Promise<{ state: string; cookie: string; location: URL }> {
  const res = await fetch(await installLink(env.db.sql, env.server.baseUrl, env.app.appId), {
    redirect: "manual",
  });
  assert.equal(res.status, 302);
  const location = new URL(res.headers.get("location")!);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0];
  return { state: location.searchParams.get("state")!, cookie, location };
}

async function callback(env: Env, query: string, cookie: string | null) {
  const res = await fetch(`${env.server.baseUrl}/api/v1/slack/callback?${query}`, {
    redirect: "manual",
    headers: cookie ? { cookie } : {},
  });
  await res.body?.cancel();
  return res;
}

/** Installs the app into the fake workspace. */
function install(env: Env, workspace: FakeSlackInstall = {}): Promise<void> {
  return installSlack(env.db.sql, env.server.baseUrl, env.slack, env.app.appId, workspace);
}

async function installations(env: Env) {
  return await env.db.sql`SELECT team_id, app_id, channel_id, bot_user_id FROM slack_installations`;
}

function posts(slack: FakeSlack) {
  return slack.calls.filter((call) => call.method === "chat.postMessage");
}

Deno.test("the install flow stores the workspace with its secrets sealed", async () => {
  await using env = await setUp();
  const { location, cookie } = await begin(env);
  assert.equal(location.origin + location.pathname, env.slack.authorizeUrl);
  assert.equal(location.searchParams.get("client_id"), CLIENT_ID);
  assert.equal(
    location.searchParams.get("redirect_uri"),
    "http://parley.test/api/v1/slack/callback",
  );
  assert.match(location.searchParams.get("scope") ?? "", /chat:write,chat:write\.customize,/);
  assert.match(cookie, /^parley_slack_state=[0-9a-f]{64}$/);
  await install(env);
  const rows = await installations(env);
  assert.equal(rows.length, 1);
  assert.deepEqual({
    team_id: rows[0].team_id,
    app_id: rows[0].app_id,
    channel_id: rows[0].channel_id,
  }, {
    team_id: TEAM,
    app_id: env.app.appId,
    channel_id: CHANNEL,
  });
  const [sealed] = await env.db
    .sql`SELECT bot_token_sealed, signing_secret_sealed FROM slack_installations`;
  assert.match(sealed.bot_token_sealed, /^v1:/);
  assert.ok(!sealed.signing_secret_sealed.includes(SIGNING_SECRET));
  assert.ok(env.slack.calls.some((call) => call.method === "conversations.join"));
});

Deno.test("every refusal of the install answers 400 and stores nothing", async () => {
  await using env = await setUp();
  const used = await installLink(env.db.sql, env.server.baseUrl, env.app.appId);
  assert.equal((await fetch(used, { redirect: "manual" })).status, 302);
  const again = await fetch(used, { redirect: "manual" });
  assert.equal(again.status, 400, "a used ticket");
  await again.body?.cancel();
  const bogus = await fetch(`${env.server.baseUrl}/api/v1/slack/install?ticket=${"0".repeat(64)}`);
  assert.equal(bogus.status, 400, "an unknown ticket");
  await bogus.body?.cancel();

  const { state, cookie } = await begin(env);
  const code = () =>
    env.slack.issueCode({
      teamId: TEAM,
      channelId: CHANNEL,
      redirectUri: "http://parley.test/api/v1/slack/callback",
    });
  assert.equal((await callback(env, `error=access_denied&state=${state}`, cookie)).status, 400);
  assert.equal(
    (await callback(env, `code=${code()}&state=${state}`, null)).status,
    400,
    "no cookie",
  );
  assert.equal(
    (await callback(env, `code=${code()}&state=${state}`, "parley_slack_state=" + "1".repeat(64)))
      .status,
    400,
    "another browser",
  );
  assert.equal(
    (await callback(env, `code=nope&state=${state}`, cookie)).status,
    400,
    "Slack refuses the code",
  );
  assert.equal(
    (await callback(env, `code=${code()}&state=${state}`, cookie)).status,
    400,
    "a used state",
  );
  const other = await begin(env);
  await env.db
    .sql`UPDATE slack_oauth_states SET expires_at = clock_timestamp() - interval '1 second'`;
  assert.equal(
    (await callback(env, `code=${code()}&state=${other.state}`, other.cookie)).status,
    400,
    "an expired state",
  );
  assert.equal((await installations(env)).length, 0);
});

Deno.test("a visitor conversation is mirrored as a thread, and an agent's thread reply reaches the visitor", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello from the web");
  await waitUntil(() => posts(env.slack).length >= 2, "the root and the first reply");
  const [root, first] = posts(env.slack);
  assert.equal(root.params.channel, CHANNEL);
  assert.ok(!root.params.thread_ts);
  assert.equal(first.params.thread_ts, await threadTs(env));
  assert.equal(first.params.text, "Hello from the web");
  const card = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: {
      chat_id: chat.chatId,
      message_type: "buttons",
      content: JSON.stringify({ text: "Pick", buttons: [{ id: "a", title: "A" }] }),
    },
  });
  assert.equal(card.status, 200);
  await waitUntil(() => posts(env.slack).length >= 3, "the bot's buttons");
  const blocks = posts(env.slack)[2].params.blocks as { type: string }[];
  assert.deepEqual(blocks.map((block) => block.type), ["section", "actions"]);

  env.slack.addUser({ id: "U1", displayName: "Ana" });
  const ts = await threadTs(env);
  const event = (id: string, text: string, messageTs: string) => ({
    type: "event_callback",
    team_id: TEAM,
    event_id: id,
    event_time: Math.floor(Date.now() / 1000),
    event: { type: "message", channel: CHANNEL, user: "U1", text, ts: messageTs, thread_ts: ts },
  });
  const answered = await env.slack.postEvent(
    `${env.server.baseUrl}/api/v1/slack/events`,
    event("Ev1", "Hi, Ana here", "1800000000.000001"),
  );
  assert.equal(answered.status, 200);
  await answered.body?.cancel();
  const note = await env.slack.postEvent(
    `${env.server.baseUrl}/api/v1/slack/events`,
    event("Ev2", "note: VIP customer", "1800000000.000002"),
  );
  await note.body?.cancel();
  // Slack retries the first event: it is not applied twice.
  const retry = await env.slack.postEvent(
    `${env.server.baseUrl}/api/v1/slack/events`,
    event("Ev1", "Hi, Ana here", "1800000000.000001"),
    { retryNum: 1 },
  );
  await retry.body?.cancel();
  await eventually(
    () =>
      env.db.sql`
      SELECT 1 FROM messages WHERE conversation_id = ${chat.chatId} AND sender_type = 'agent'`,
    (rows) => rows.length >= 2,
    "both agent replies",
  );
  await new Promise((resolve) => setTimeout(resolve, 200)); // a double apply would show by now
  const rows = await env.db.sql`
    SELECT sender_type, sender_name, content, internal FROM messages
    WHERE conversation_id = ${chat.chatId} AND sender_type = 'agent' ORDER BY id`;
  assert.deepEqual(rows.map((row) => ({ ...row })), [
    { sender_type: "agent", sender_name: "Ana", content: "Hi, Ana here", internal: false },
    { sender_type: "agent", sender_name: "Ana", content: "note: VIP customer", internal: true },
  ]);
  const seen = await visitorHistory(env, chat);
  assert.ok(seen.includes("Hi, Ana here"));
  assert.ok(!seen.includes("note: VIP customer"), "notes never reach the visitor");
  // Agent replies typed in Slack are not posted back into the thread.
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(posts(env.slack).length, 3);
});

Deno.test("a root post whose answer was cut is found in the channel, not posted again", async () => {
  await using env = await setUp();
  await install(env);
  env.slack.cutAnswers("chat.postMessage");
  await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello once");
  await waitUntil(() => posts(env.slack).length >= 2, "the root and the message");
  await new Promise((resolve) => setTimeout(resolve, 300));
  const [root, ...replies] = posts(env.slack);
  assert.ok(!root.params.thread_ts);
  assert.deepEqual(replies.map((call) => call.params.text), ["Hello once"], "one root only");
  const history = env.slack.calls.filter((call) => call.method === "conversations.history");
  assert.equal(history.length, 1);
  const ts = await threadTs(env);
  assert.equal(replies[0].params.thread_ts, ts);
  assert.match(ts, /^\d{10}\.\d{6}$/);
  const [{ n }] = await env.db.sql`SELECT count(*)::int AS n FROM slack_root_attempts`;
  assert.equal(n, 0, "found: forgotten");
});

Deno.test("a root attempted before is looked for before the conversation's next send posts one", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  await waitUntil(() => posts(env.slack).length >= 2, "the root and the message");
  const ts = await threadTs(env);
  await eventually(
    () => env.db.sql`SELECT 1 FROM outbox WHERE kind = 'slack' AND state = 'pending'`,
    (rows) => rows.length === 0,
    "the conversation's sends done",
  );
  // As if the process had ended between the root's post and its thread's save.
  await env.db.sql.begin((tx) => [
    tx`DELETE FROM slack_threads`,
    tx`INSERT INTO slack_root_attempts (app_id, conversation_id, team_id, channel_id)
      VALUES (${env.app.appId}, ${chat.chatId}, ${TEAM}, ${CHANNEL})`,
  ]);
  const sent = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: chat.chatId, content: "Still here" },
  });
  assert.equal(sent.status, 200);
  await waitUntil(() => posts(env.slack).length >= 3, "the reply");
  const [root, ...replies] = posts(env.slack);
  assert.ok(!root.params.thread_ts);
  assert.deepEqual(replies.map((call) => [call.params.thread_ts, call.params.text]), [
    [ts, "Hello"],
    [ts, "Still here"],
  ]);
  assert.equal(await threadTs(env), ts);
});

Deno.test("another organisation's member in a shared channel is no agent: their replies, edits and clicks change nothing", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  const thread = await threadTs(env);
  env.slack.addUser({ id: "U1", displayName: "Ana" });
  env.slack.addUser({ id: "UX", displayName: "Outsider" });
  const post = eventPoster(env);
  const outside = { user: "UX", user_team: "TOTHER", source_team: "TOTHER", team: "TOTHER" };
  await post(
    threadEvent("EvX1", thread, { ...outside, text: "from outside", ts: "1800000000.000101" }),
  );
  await post(threadEvent("EvX2", thread, {
    subtype: "message_changed",
    message: {
      ...outside,
      text: "edited outside",
      ts: "1800000000.000101",
      thread_ts: thread,
      files: [{ id: "F0OUT", name: "x.png", mimetype: "image/png" }],
    },
  }));
  // A member's reply naming the workspace's own team, after them: applied once they were.
  const member = { user: "U1", user_team: TEAM, team: TEAM };
  await post(threadEvent("EvM1", thread, { ...member, text: "from Ana", ts: "1800000000.000102" }));
  const rows = await agentMessages(env, chat.chatId, (found) => found.length >= 1, "Ana's reply");
  await new Promise((resolve) => setTimeout(resolve, 300)); // anything else would show by now
  const after = await env.db.sql`
    SELECT sender_type, sender_name, content FROM messages
    WHERE conversation_id = ${chat.chatId} AND sender_type <> 'visitor' ORDER BY id`;
  assert.deepEqual(after.map((row) => ({ ...row })), [
    { sender_type: "agent", sender_name: "Ana", content: "from Ana" },
  ]);
  assert.equal(rows.length, 1);
  // The outsider's Close, once applied (as changing nothing), has left the conversation open.
  const clicked = await env.slack.postAction(
    `${env.server.baseUrl}/api/v1/slack/actions`,
    { ...blockActions([closeAction(chat.chatId)], "UX"), user: { id: "UX", team_id: "TOTHER" } },
  );
  assert.equal(clicked.status, 200);
  await clicked.body?.cancel();
  await eventually(
    () =>
      env.db.sql`
      SELECT count(*)::int AS total, count(*) FILTER (WHERE processed_at IS NULL)::int AS open
      FROM slack_deliveries`,
    ([row]) => row.total >= 4 && row.open === 0,
    "every request applied (as changing nothing)",
  );
  const [conversation] = await env.db.sql`
    SELECT status FROM conversations WHERE id = ${chat.chatId}`;
  assert.equal(conversation.status, "open", "the outsider's Close did nothing");
});

Deno.test("in an Enterprise Grid organisation's shared channel, colleagues from its other workspaces are agents and other organisations' members are not", async () => {
  await using env = await setUp();
  await install(env, { enterprise: { id: "E0ACME", name: "Acme Group" } });
  const [stored] = await env.db.sql`SELECT enterprise_id FROM slack_installations`;
  assert.equal(stored.enterprise_id, "E0ACME", "the organisation is recorded at install");
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  const thread = await threadTs(env);
  // Bea works in the organisation's other workspace; Olaf in another Grid organisation.
  env.slack.addUser({
    id: "W0BEA",
    displayName: "Bea",
    teamId: "T0OTHERWS",
    enterpriseId: "E0ACME",
  });
  env.slack.addUser({
    id: "W0OLAF",
    displayName: "Olaf",
    teamId: "T0GLOBEX",
    enterpriseId: "E0GLOBEX",
  });
  const post = eventPoster(env);
  const shared = { is_ext_shared_channel: true };
  const event = (id: string, fields: Record<string, unknown>) => ({
    ...threadEvent(id, thread, fields),
    ...shared,
  });
  await post(
    event("EvG1", {
      user: "W0OLAF",
      user_team: "T0GLOBEX",
      text: "from Globex",
      ts: "1800000000.000201",
    }),
  );
  await post(
    event("EvG2", {
      user: "W0BEA",
      user_team: "T0OTHERWS",
      text: "from Bea",
      ts: "1800000000.000202",
    }),
  );
  await agentMessages(env, chat.chatId, (found) => found.length >= 1, "Bea's reply");
  // Olaf's Close (his click names his organisation) does nothing; Bea's, naming another of her
  // organisation's workspaces, closes the conversation.
  const click = async (user: string, team: string) => {
    const res = await env.slack.postAction(`${env.server.baseUrl}/api/v1/slack/actions`, {
      ...blockActions([closeAction(chat.chatId)], user),
      user: { id: user, team_id: team },
      enterprise: { id: "E0ACME", name: "Acme Group" },
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
  };
  await click("W0OLAF", "E0GLOBEX");
  await eventually(
    () => env.db.sql`SELECT count(*)::int AS open FROM slack_deliveries WHERE processed_at IS NULL`,
    ([row]) => row.open === 0,
    "Olaf's click applied (as changing nothing)",
  );
  const [before] = await env.db.sql`SELECT status FROM conversations WHERE id = ${chat.chatId}`;
  assert.equal(before.status, "open", "another organisation's member cannot close it");
  await click("W0BEA", "T0OTHERWS");
  await eventually(
    () => env.db.sql`SELECT status FROM conversations WHERE id = ${chat.chatId}`,
    ([row]) => row.status === "closed",
    "Bea's Close applied",
  );
  const replies = await env.db.sql`
    SELECT sender_name, content FROM messages
    WHERE conversation_id = ${chat.chatId} AND sender_type = 'agent' ORDER BY id`;
  assert.deepEqual(replies.map((row) => ({ ...row })), [
    { sender_name: "Bea", content: "from Bea" },
  ]);
});

/** The ts of the conversation's thread. */
async function threadTs(env: Env): Promise<string> {
  const [row] = await eventually(
    () => env.db.sql`SELECT thread_ts FROM slack_threads`,
    (rows) => rows.length > 0,
    "the thread",
  );
  return row.thread_ts;
}

Deno.test("a visitor's messages are posted under their name with a visitor's icon", async () => {
  await using env = await setUp();
  await install(env);
  const unnamed = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hi");
  await waitUntil(() => posts(env.slack).length >= 2, "the unnamed visitor's message");
  const created = await fetch(`${env.server.baseUrl}/api/v1/widget/${env.app.publicId}/visitors`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "Parley" }),
  });
  const { visitor_token: token } = (await created.json()).data;
  const sent = await fetch(`${env.server.baseUrl}/api/v1/widget/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ content: "I am not the system" }),
  });
  assert.equal(sent.status, 200);
  await waitUntil(() => posts(env.slack).length >= 4, "the named visitor's message");
  const replies = posts(env.slack).filter((post) => post.params.thread_ts).map((post) => ({
    username: post.params.username,
    icon: post.params.icon_emoji,
  }));
  assert.deepEqual(replies, [
    { username: `Visitor #${unnamed.chatId}`, icon: ":bust_in_silhouette:" },
    { username: "Parley", icon: ":bust_in_silhouette:" },
  ]);
});

Deno.test("a signed Slack request over 1 MiB is refused with 413, an unsigned one with 401, and neither is stored", async () => {
  await using env = await setUp();
  const res = await env.slack.postEvent(`${env.server.baseUrl}/api/v1/slack/events`, {
    type: "event_callback",
    team_id: TEAM,
    event_id: "EvBig",
    event: { type: "message", text: "x".repeat(1024 * 1024) },
  });
  assert.equal(res.status, 413);
  assert.equal((await res.json()).message, "Request body too large");
  // Unsigned, the same size is refused for its signature (CONTRACT §6.2), its upload unread.
  for (const path of ["events", "actions"]) {
    const unsigned = await fetch(`${env.server.baseUrl}/api/v1/slack/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "x".repeat(1024 * 1024 + 1),
    });
    assert.equal(unsigned.status, 401, path);
    assert.equal((await unsigned.json()).message, "Invalid Slack signature");
  }
  const [row] = await env.db.sql`SELECT count(*) AS n FROM slack_deliveries`;
  assert.equal(row.n, 0);
});

Deno.test("forged, stale, future and unsigned Slack requests are refused and change nothing", async () => {
  await using env = await setUp();
  const url = `${env.server.baseUrl}/api/v1/slack/events`;
  const body = {
    type: "event_callback",
    team_id: TEAM,
    event_id: "EvX",
    event: { type: "message" },
  };
  const now = Math.floor(Date.now() / 1000);
  for (
    const options of [
      { signingSecret: "wrong" },
      { timestamp: now - 6 * 60 },
      { timestamp: now + 6 * 60 },
      { signature: null },
    ]
  ) {
    const res = await env.slack.postEvent(url, body, options);
    assert.equal(res.status, 401, JSON.stringify(options));
    await res.body?.cancel();
  }
  const challenge = await env.slack.postEvent(url, { type: "url_verification", challenge: "abc" });
  assert.deepEqual(await challenge.json(), { challenge: "abc" });
  const [row] = await env.db.sql`SELECT count(*) AS n FROM slack_deliveries`;
  assert.equal(row.n, 0);
});

Deno.test("without a signing secret every Slack request is refused", async () => {
  await using env = await setUp({ signingSecret: null });
  const res = await env.slack.postEvent(`${env.server.baseUrl}/api/v1/slack/events`, {
    type: "url_verification",
    challenge: "abc",
  });
  assert.equal(res.status, 401);
  await res.body?.cancel();
});

Deno.test("a streamed Slack request that cannot pass is refused before its body is read", async () => {
  await using env = await setUp();
  for (const path of ["/api/v1/slack/events", "/api/v1/slack/actions"]) {
    // A chunked body begun and never finished: an answer proves nothing waited for the upload.
    const answer = await firstAnswer(env.server.baseUrl, [
      `POST ${path} HTTP/1.1`,
      "Host: parley.test",
      "Content-Type: application/json",
      "Transfer-Encoding: chunked",
      "X-Slack-Signature: v0=forged",
      "",
      '10\r\n{"type":"what',
    ]);
    assert.match(answer, /^HTTP\/1\.1 401 /, `${path}: ${answer}`);
  }
});

Deno.test("Close on the root message closes the conversation; a Flow button in Slack advances the Flow", async () => {
  await using env = await setUp();
  await install(env);
  const flow = {
    start: "ask",
    nodes: {
      ask: {
        message: {
          message_type: "buttons",
          content: { text: "Sales?", buttons: [{ id: "yes", title: "Yes" }] },
        },
        on: { yes: "done" },
      },
      done: { message: { message_type: "text", content: "Connecting you." } },
    },
  };
  assert.equal(
    (await apiCall(env.server.baseUrl, "/flow", { method: "PUT", key: env.app.key, json: flow }))
      .status,
    200,
  );
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hi");
  await waitUntil(() => posts(env.slack).length >= 3, "root, visitor message, Flow buttons");
  const [flowMessage] = await env.db.sql`
    SELECT id FROM messages WHERE conversation_id = ${chat.chatId} AND sender_type = 'flow'`;
  const actionsUrl = `${env.server.baseUrl}/api/v1/slack/actions`;
  const clicked = await env.slack.postAction(
    actionsUrl,
    blockActions([buttonAction(flowMessage.id, "yes")]),
  );
  assert.equal(clicked.status, 200);
  await clicked.body?.cancel();
  await waitUntil(
    () => posts(env.slack).some((call) => call.params.text === "Connecting you."),
    "the Flow's next node mirrored",
    5_000,
  );

  const closed = await env.slack.postAction(
    actionsUrl,
    blockActions([closeAction(chat.chatId, String(chat.chatId))]),
  );
  await closed.body?.cancel();
  const [row] = await eventually(
    () => env.db.sql`SELECT status FROM conversations WHERE id = ${chat.chatId}`,
    ([current]) => current.status === "closed",
    "the conversation closed",
  );
  assert.equal(row.status, "closed");
  await waitUntil(
    () => env.slack.calls.some((call) => call.method === "chat.update"),
    "the root shows closed",
  );
});

Deno.test("a click whose apply failed stays unprocessed; one failing for a reason that may pass is retried", async () => {
  await using env = await setUp();
  await install(env);
  const answers: CommandResult[] = [];
  const asked: AppCommand[] = [];
  const processor = createSlackInboundProcessor({
    sql: env.db.sql,
    ask: (_key, command) => {
      asked.push(command);
      return Promise.resolve(answers.shift() ?? { ok: true, value: null });
    },
    clientFor: () => {
      throw new Error("no Slack call expected");
    },
    mediaLinks: createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" }),
    applyWindowMs: 1,
    retry: { retryDelaysMs: [10] },
  });
  const closeClick = async () => {
    const payload = blockActions([closeAction(42, "42")]);
    const body = actionBody(payload);
    const [{ id }] = await env.db.sql`
      INSERT INTO slack_deliveries (kind, body) VALUES ('action', ${body}) RETURNING id`;
    return { id: Number(id), body, payload };
  };
  const delivery = async (id: number) => ({
    ...(await env.db.sql`
      SELECT processed_at IS NOT NULL AS processed, attempts FROM slack_deliveries WHERE id = ${id}`)[
      0
    ],
  });

  // The database was not reached: tried again, then applied.
  const retried = await closeClick();
  answers.push(UNAVAILABLE);
  await processor.process("action", retried.id, retried.body, retried.payload);
  assert.equal(asked.length, 2);
  assert.deepEqual(await delivery(retried.id), { processed: true, attempts: 0 });
  // Each try carries the workspace's stream, the retry at a later epoch: the actor refuses what
  // was handed over behind the failed try at its epoch, so nothing passes it.
  const places = asked.map((command) => "order" in command ? command.order : undefined);
  assert.equal(places[0]?.stream, `slack:${TEAM}`);
  assert.ok(places[1]!.epoch > places[0]!.epoch);
  // So do events.
  const event = threadEvent("Ev_ORDER", "1700000000.000001", { user: "U1", text: "hi", ts: "1.2" });
  const [{ id: eventId }] = await env.db.sql`
    INSERT INTO slack_deliveries (kind, body) VALUES ('event', ${new Uint8Array()}) RETURNING id`;
  await processor.process("event", Number(eventId), new Uint8Array(), event);
  const submitted = asked.at(-1)!;
  assert.equal(submitted.kind, "slack.event");
  assert.equal("order" in submitted && submitted.order?.stream, `slack:${TEAM}`);
  asked.length = 2;

  // A failure that would repeat: not retried, not marked processed, an attempt counted.
  const failed = await closeClick();
  answers.push({ ok: false, status: 500, message: "Internal server error" });
  await assert.rejects(processor.process("action", failed.id, failed.body, failed.payload));
  assert.equal(asked.length, 3);
  assert.deepEqual(await delivery(failed.id), { processed: false, attempts: 1 });

  // A refusal (another application's conversation) is the click's final answer.
  const refused = await closeClick();
  answers.push({ ok: false, status: 404, message: "Conversation not found" });
  await processor.process("action", refused.id, refused.body, refused.payload);
  assert.deepEqual(await delivery(refused.id), { processed: true, attempts: 0 });
});

Deno.test("live Slack requests wait until the recovery at start has handed over the older ones", async () => {
  await using env = await setUp();
  await install(env);
  const closed: number[] = [];
  const processor = createSlackInboundProcessor({
    sql: env.db.sql,
    ask: (_key, command) => {
      if (command.kind === "chat.close") closed.push(command.chatId);
      return Promise.resolve({ ok: true, value: null });
    },
    clientFor: () => {
      throw new Error("no Slack call expected");
    },
    mediaLinks: createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" }),
    applyWindowMs: 1,
  });
  const closeClick = (chatId: number) => actionBody(blockActions([closeAction(chatId)]));
  for (const chatId of [1, 2, 3]) {
    await env.db.sql`INSERT INTO slack_deliveries (kind, body) VALUES ('action', ${
      closeClick(chatId)
    })`;
  }
  const recovered = processor.recover({ olderThanSeconds: 0, holdLive: true });
  const live = processor.process("action", 1_000_000, closeClick(4));
  assert.equal(await recovered, 3);
  await live;
  assert.deepEqual(closed, [1, 2, 3, 4]);
});

Deno.test("a click with several actions hands them all to the actor at once, in order", async () => {
  await using env = await setUp();
  await install(env);
  const asked: number[] = [];
  const answer = Promise.withResolvers<CommandResult>();
  const processor = createSlackInboundProcessor({
    sql: env.db.sql,
    ask: (_key, command) => {
      if (command.kind === "chat.close") asked.push(command.chatId);
      return answer.promise;
    },
    clientFor: () => {
      throw new Error("no Slack call expected");
    },
    mediaLinks: createMediaLinks({ encryptionKey: new Uint8Array(32), publicBaseUrl: "http://x" }),
    applyWindowMs: 1,
  });
  const payload = blockActions([closeAction(41), closeAction(42)]);
  const body = actionBody(payload);
  const [{ id }] = await env.db.sql`
    INSERT INTO slack_deliveries (kind, body) VALUES ('action', ${body}) RETURNING id`;
  const applying = processor.process("action", Number(id), body, payload);
  await eventually(() => Promise.resolve(asked.length), (count) => count > 0, "asked");
  // Awaited one by one, a request behind it could reach the actor before the second.
  assert.deepEqual(asked, [41, 42], "both asked before the first was answered");
  answer.resolve({ ok: true, value: null });
  await applying;
});

Deno.test("a Slack click on a WhatsApp conversation's Flow step does not reopen its 24-hour window; the step is kept failed", async () => {
  await using env = await setUp();
  await install(env);
  const ask = {
    message_type: "buttons",
    content: { text: "Sales?", buttons: [{ id: "yes", title: "Yes" }] },
  };
  const flow = {
    start: "ask",
    nodes: {
      ask: { message: ask, on: { yes: "done" } },
      done: { message: { message_type: "text", content: "Connecting you." } },
    },
  };
  const put = await apiCall(env.server.baseUrl, "/flow", {
    method: "PUT",
    key: env.app.key,
    json: flow,
  });
  assert.equal(put.status, 200);
  const { sql } = env.db;
  const appId = env.app.appId;
  await sql`INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${appId}, 'https://example.com/h', '{message.sent,message.failed}', true, 'x')`;
  // A WhatsApp customer who last wrote 25 hours ago, their conversation waiting on the step.
  const [client] = await sql<{ id: number }[]>`
    INSERT INTO clients (app_id, name) VALUES (${appId}, 'Ana') RETURNING id`;
  const [chat] = await sql<{ id: number }[]>`
    INSERT INTO conversations (app_id, client_id, channel, status, last_message_at, last_inbound_at)
    VALUES (${appId}, ${client.id}, 'whatsapp', 'open', now() - interval '25 hours',
      now() - interval '25 hours')
    RETURNING id`;
  const [step] = await sql<{ id: number }[]>`
    INSERT INTO messages (app_id, conversation_id, sender_type, message_type, content, payload)
    VALUES (${appId}, ${chat.id}, 'flow', 'buttons', ${JSON.stringify(ask.content)},
      ${sql.json(ask.content)})
    RETURNING id`;
  await sql`UPDATE conversations SET action_message_id = ${step.id}, flow_node = 'ask'
    WHERE id = ${chat.id}`;
  const clicked = await env.slack.postAction(
    `${env.server.baseUrl}/api/v1/slack/actions`,
    blockActions([buttonAction(step.id, "yes")], "U_AGENT"),
  );
  await clicked.body?.cancel();
  // The click is accepted, but it is not the customer writing: the Flow's next step, free-form,
  // may not go out (as Meta would refuse it): it is kept failed, for the business to see, and
  // the window stays closed.
  await eventually(
    () => sql`SELECT 1 FROM slack_deliveries WHERE processed_at IS NOT NULL`,
    (rows) => rows.length > 0,
    "the click applied",
  );
  const stored = await sql`
    SELECT id, sender_type, content, status, failure_code, failure_title FROM messages
    WHERE conversation_id = ${chat.id} ORDER BY id`;
  assert.deepEqual(
    stored.slice(1).map((row) =>
      `${row.sender_type}: ${row.content} (${row.status}${
        row.failure_title ? ` ${row.failure_code}: ${row.failure_title}` : ""
      })`
    ),
    [
      "visitor: Yes (null)",
      "flow: Connecting you. (failed 131047: Outside the 24-hour window: only template messages can be sent)",
    ],
  );
  const failedId = String(stored[2].id);
  const queued = await sql`
    SELECT kind, topic, payload ->> 'message_id' AS message_id FROM outbox
    WHERE app_id = ${appId} AND kind IN ('webhook', 'whatsapp') ORDER BY id`;
  assert.deepEqual(
    queued.filter((row) => row.message_id === failedId).map((row) => `${row.kind} ${row.topic}`),
    ["webhook message.failed"],
    "announced as failed, never sent to WhatsApp",
  );
  await eventually(
    () => Promise.resolve(posts(env.slack)),
    (calls) => calls.some((call) => String(call.params.text).includes("Not delivered")),
    "the thread says the step was not delivered",
  );
  const mirrored = posts(env.slack).map((call) => String(call.params.text));
  const stepPost = mirrored.findIndex((text) => text.includes("Connecting you."));
  assert.equal(
    mirrored[stepPost + 1],
    ":warning: Not delivered: Outside the 24-hour window: only template messages can be sent",
  );
  const [after] = await sql`
    SELECT now() - last_inbound_at > interval '24 hours' AS closed FROM conversations
    WHERE id = ${chat.id}`;
  assert.equal(after.closed, true, "the window stays closed");
  const reply = await apiCall(env.server.baseUrl, "/messages", {
    method: "POST",
    key: env.app.key,
    json: { chat_id: chat.id, content: "hi" },
  });
  assert.equal(reply.status, 422);
});

Deno.test("a part whose blocks Slack refuses is posted as its whole plain text", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hi");
  await waitUntil(() => posts(env.slack).length >= 2, "root and visitor message");
  // What Slack answers for an image block whose URL it cannot download.
  env.slack.queue("chat.postMessage", {
    body: {
      ok: false,
      error: "invalid_blocks",
      errors: ["downloading image failed [json-pointer:/blocks/0/accessory/image_url]"],
    },
  });
  // A subtitle longer than the 3,000 characters a post's `text` carries beside its blocks.
  const subtitle = Array.from({ length: 500 }, (_, n) => `word${n}`).join(" ");
  const card = {
    title: "Your order #1234",
    subtitle,
    image_url: "https://example.com/missing.png",
    buttons: [{ id: "track", title: "Track" }],
  };
  const sent = await apiCall(env.server.baseUrl, "/messages", {
    method: "POST",
    key: env.app.key,
    json: { chat_id: chat.chatId, message_type: "card", content: JSON.stringify(card) },
  });
  assert.equal(sent.status, 200);
  await waitUntil(() => posts(env.slack).length >= 4, "the card, then its fallback");
  const [refused, fallback] = posts(env.slack).slice(2);
  assert.ok(refused.params.blocks, "first with its blocks");
  assert.equal(fallback.params.blocks, undefined);
  const text = String(fallback.params.text);
  assert.ok(text.startsWith("*Your order #1234*\nword0 word1"), text.slice(0, 40));
  assert.ok(text.endsWith("word499\n• Track"), text.slice(-40));
  const [row] = await eventually(
    () => env.db.sql`SELECT state FROM outbox WHERE kind = 'slack' ORDER BY id DESC LIMIT 1`,
    ([last]) => last?.state === "succeeded",
    "the send recorded",
  );
  assert.equal(row.state, "succeeded");
});

/** A `block_actions` payload from member `user` of the workspace, as Slack posts it to /actions. */
function blockActions(actions: unknown[], user = "U1") {
  return { type: "block_actions", team: { id: TEAM }, user: { id: user, team_id: TEAM }, actions };
}

/** A click on the Close button of conversation `chatId`'s root message. */
function closeAction(chatId: number, value = "") {
  return { type: "button", action_id: "parley_close", block_id: `parley_chat:${chatId}`, value };
}

/** A click on the first button (id `buttonId`) of message `messageId`. */
function buttonAction(messageId: number, buttonId: string) {
  return {
    type: "button",
    action_id: "parley_button:0",
    block_id: `parley_message:${messageId}:0`,
    value: buttonId,
  };
}

/** An /actions body: the payload form-encoded, as Slack sends it. */
function actionBody(payload: unknown): Uint8Array {
  return new TextEncoder().encode(`payload=${encodeURIComponent(JSON.stringify(payload))}`);
}

/** A member's message in the conversation's thread, as Slack sends it. */
function threadEvent(id: string, thread: string, event: Record<string, unknown>) {
  return {
    type: "event_callback",
    team_id: TEAM,
    event_id: id,
    event_time: Math.floor(Date.now() / 1000),
    event: { type: "message", channel: CHANNEL, thread_ts: thread, ...event },
  };
}

/** A visitor's socket and the frames it received until closed. */
async function openVisitorSocket(env: Env, token: string, since?: string) {
  const frames: {
    type: string;
    message?: { id: number; content?: string; created_at?: string };
  }[] = [];
  const socket = new WebSocket(
    `${env.server.baseUrl.replace("http", "ws")}/api/v1/widget/socket?token=${token}` +
      (since ? `&since=${encodeURIComponent(since)}` : ""),
  );
  socket.onmessage = (event) => frames.push(JSON.parse(event.data));
  await new Promise((resolve) => socket.onopen = resolve);
  return {
    frames,
    async close() {
      const closed = new Promise((resolve) => socket.onclose = resolve);
      socket.close();
      await closed;
    },
  };
}

/** The contents of the messages a visitor's history shows them, oldest first. */
async function visitorHistory(env: Env, chat: { chatId: number; token: string }) {
  const res = await fetch(
    `${env.server.baseUrl}/api/v1/widget/messages?chat_id=${chat.chatId}`,
    { headers: { authorization: `Bearer ${chat.token}` } },
  );
  assert.equal(res.status, 200);
  return (await res.json()).data.map((message: { content: string }) => message.content) as string[];
}

/** Posts signed events to Parley, each to be answered 200. */
function eventPoster(env: Env) {
  const events = `${env.server.baseUrl}/api/v1/slack/events`;
  return async (body: unknown, options: { retryNum?: number } = {}) => {
    const res = await env.slack.postEvent(events, body, options);
    assert.equal(res.status, 200);
    await res.body?.cancel();
  };
}

async function agentMessages(
  env: Env,
  chatId: number,
  accept: (rows: Record<string, unknown>[]) => boolean,
  what: string,
) {
  return await eventually(
    () =>
      env.db.sql`
      SELECT id, message_type, content, payload, deleted_at IS NOT NULL AS deleted FROM messages
      WHERE conversation_id = ${chatId} AND sender_type = 'agent' ORDER BY id`,
    accept,
    what,
  );
}

Deno.test("edits and deletions in Slack follow the mirrored message; the bot's own posts are ignored", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  const thread = await threadTs(env);
  const { frames, close } = await openVisitorSocket(env, chat.token);
  const send = eventPoster(env);
  // A first delivery that never reached Parley: Slack's retry is applied.
  await send(
    threadEvent("Ev10", thread, { user: "U2", text: "First try", ts: "1800000001.000001" }),
    { retryNum: 1 },
  );
  await send(
    threadEvent("Ev11", thread, {
      bot_id: "B1",
      text: "echo of our own post",
      ts: "1800000001.000002",
    }),
  );
  await send(
    threadEvent("Ev12", thread, {
      user: "U2",
      text: "top-level",
      ts: "1800000001.000003",
      thread_ts: undefined,
    }),
  );
  let rows = await agentMessages(env, chat.chatId, (current) => current.length >= 1, "the reply");
  assert.deepEqual(rows.map((row) => row.content), ["First try"]);

  await send({
    ...threadEvent("Ev13", thread, {
      subtype: "message_changed",
      message: {
        user: "U2",
        text: "First try, edited",
        ts: "1800000001.000001",
        thread_ts: thread,
      },
      previous_message: { user: "U2", text: "First try", ts: "1800000001.000001" },
    }),
  });
  rows = await agentMessages(
    env,
    chat.chatId,
    (current) => current[0]?.content === "First try, edited",
    "the edit",
  );
  assert.equal(rows[0].content, "First try, edited");
  await send(
    threadEvent("Ev14", thread, {
      subtype: "message_deleted",
      deleted_ts: "1800000001.000001",
      previous_message: { user: "U2", text: "First try, edited", ts: "1800000001.000001" },
    }),
  );
  rows = await agentMessages(
    env,
    chat.chatId,
    (current) => current[0]?.deleted === true,
    "the deletion",
  );
  assert.equal(rows[0].deleted, true);
  // The visitor's socket saw the reply, its edit and its deletion.
  await waitUntil(() => frames.some((frame) => frame.type === "message.deleted"), "the deletion");
  assert.deepEqual(
    frames.filter((frame) => frame.message?.id === rows[0].id).map((frame) =>
      `${frame.type} ${frame.message?.content ?? ""}`.trim()
    ),
    ["message.created First try", "message.updated First try, edited", "message.deleted"],
  );
  await close();
  const seen = await visitorHistory(env, chat);
  assert.deepEqual(seen, ["Hello"]);
});

Deno.test("an edit or a deletion applied before Slack's retry of the reply it changes wins over the retry", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Price?");
  const thread = await threadTs(env);
  const send = eventPoster(env);
  const file = { id: "F0PRICES", name: "prices.pdf", mimetype: "application/pdf" };
  env.slack.addFile({ ...file, bytes: new TextEncoder().encode("%PDF prices") });
  // The replies' first deliveries never reached Parley; their edit and deletion did.
  const edited = { user: "U2", ts: "1800000011.000001", thread_ts: thread, files: [file] };
  await send(threadEvent("Ev81", thread, {
    subtype: "message_changed",
    message: { ...edited, text: "It is 12 euros" },
    previous_message: { ...edited, text: "It is 10 euros" },
  }));
  await send(threadEvent("Ev83", thread, {
    subtype: "message_deleted",
    deleted_ts: "1800000011.000002",
    previous_message: { user: "U2", text: "Wrong customer!", ts: "1800000011.000002" },
  }));
  await agentMessages(env, chat.chatId, (rows) => rows.length === 2, "the edited reply");
  // Slack's retries of the replies come after.
  await send(
    threadEvent("Ev80", thread, {
      subtype: "file_share",
      ...edited,
      text: "It is 10 euros",
    }),
    { retryNum: 1 },
  );
  await send(
    threadEvent("Ev82", thread, {
      user: "U2",
      text: "Wrong customer!",
      ts: "1800000011.000002",
    }),
    { retryNum: 1 },
  );
  // An edit of a reply of two hours ago Parley never had: no retry of it is to come, and the
  // visitor does not get it now, out of its time.
  const old = `${Math.floor(Date.now() / 1000) - 7200}.000100`;
  await send(threadEvent("Ev85", thread, {
    subtype: "message_changed",
    message: { user: "U2", ts: old, thread_ts: thread, text: "Long ago, edited" },
    previous_message: { user: "U2", ts: old, thread_ts: thread, text: "Long ago" },
  }));
  // A later reply is applied after all these (one workspace's events apply in order).
  await send(
    threadEvent("Ev84", thread, { user: "U2", text: "Anything else?", ts: "1800000011.000003" }),
  );
  const rows = await agentMessages(
    env,
    chat.chatId,
    (found) => found.length >= 3,
    "the last reply",
  );
  assert.deepEqual(rows.map((row) => `${row.message_type} ${row.content}`), [
    "text It is 12 euros",
    `file ${rows[1].content}`,
    "text Anything else?",
  ]);
  assert.match(rows[1].content, /prices\.pdf/);
  assert.deepEqual(await visitorHistory(env, chat), [
    "Price?",
    "It is 12 euros",
    rows[1].content,
    "Anything else?",
  ]);
});

Deno.test("deleting a reply in Slack deletes every message it made, also when the event has no previous_message", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Can I see it?");
  const thread = await threadTs(env);
  const file = {
    id: "F0INVOICE",
    name: "invoice.pdf",
    mimetype: "application/pdf",
    bytes: new TextEncoder().encode("%PDF someone else's invoice"),
  };
  env.slack.addFile(file);
  const send = eventPoster(env);
  const ts = "1800000003.000001";
  await send(threadEvent("Ev30", thread, {
    subtype: "file_share",
    user: "U3",
    text: "Here is your invoice",
    ts,
    files: [{ id: file.id, name: file.name, mimetype: file.mimetype }],
  }));
  const [, shared] = await agentMessages(
    env,
    chat.chatId,
    (rows) => rows.length === 2,
    "the text and the file",
  );
  const link = String((shared.payload as { url: string }).url);
  assert.equal(await mediaStatus(env, link), 200, "the visitor downloads the file");
  // The wrong file: the agent deletes the whole reply. The event as Slack documents it
  // (docs.slack.dev/reference/events/message/message_deleted) has no previous_message.
  const deletion = threadEvent("Ev31", thread, {
    subtype: "message_deleted",
    hidden: true,
    deleted_ts: ts,
    ts: "1800000003.000009",
  });
  delete (deletion.event as { thread_ts?: string }).thread_ts;
  await send(deletion);
  await agentMessages(
    env,
    chat.chatId,
    (rows) => rows.every((row) => row.deleted === true),
    "the text and the file deleted",
  );
  const history = await fetch(
    `${env.server.baseUrl}/api/v1/widget/messages?chat_id=${chat.chatId}`,
    { headers: { authorization: `Bearer ${chat.token}` } },
  );
  const seen = (await history.json()).data.map((m: { sender_type: string }) => m.sender_type);
  assert.deepEqual(seen, ["visitor"]);
  assert.equal(await mediaStatus(env, link), 410, "the link the visitor kept serves it no longer");
});

/** The status of a GET of a media link, at the test server (its body dropped). */
async function mediaStatus(env: Env, link: string): Promise<number> {
  const url = new URL(link);
  const res = await fetch(`${env.server.baseUrl}${url.pathname}${url.search}`);
  await res.body?.cancel();
  return res.status;
}

Deno.test("a reply with files edited into a note takes its files from the visitor too", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "My invoice?");
  const thread = await threadTs(env);
  const file = { id: "F0WRONG", name: "invoice.pdf", mimetype: "application/pdf" };
  env.slack.addFile({ ...file, bytes: new TextEncoder().encode("%PDF another's invoice") });
  const { frames, close } = await openVisitorSocket(env, chat.token);
  const send = eventPoster(env);
  const posted = { user: "U3", ts: "1800000006.000001", thread_ts: thread, files: [file] };
  await send(
    threadEvent("Ev60", thread, { subtype: "file_share", ...posted, text: "Invoice attached" }),
  );
  const [text, attached] = await agentMessages(env, chat.chatId, (r) => r.length === 2, "both");
  const link = String((attached.payload as { url: string }).url);
  assert.equal(await mediaStatus(env, link), 200);
  await send(threadEvent("Ev61", thread, {
    subtype: "message_changed",
    message: { ...posted, text: "note: wrong customer's invoice!" },
    previous_message: { ...posted, text: "Invoice attached" },
  }));
  const rows = await eventually(
    () =>
      env.db.sql`
      SELECT id, internal, hidden_at IS NOT NULL AS hidden FROM messages
      WHERE conversation_id = ${chat.chatId} AND sender_type = 'agent' ORDER BY id`,
    (found) => found.every((row) => row.internal),
    "the reply and its file made internal",
  );
  assert.deepEqual(rows.map((row) => ({ ...row })), [
    { id: text.id, internal: true, hidden: true },
    { id: attached.id, internal: true, hidden: true },
  ]);
  await waitUntil(
    () => frames.filter((frame) => frame.type === "message.deleted").length === 2,
    "both removed from the socket",
  );
  await close();
  const seen = await visitorHistory(env, chat);
  assert.deepEqual(seen, ["My invoice?"]);
  assert.equal(await mediaStatus(env, link), 410, "the link the visitor kept serves it no longer");
});

Deno.test("a reply of files only given a note's text by an edit takes its files from the visitor", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "The file?");
  const thread = await threadTs(env);
  const file = { id: "F0OOPS", name: "oops.pdf", mimetype: "application/pdf" };
  env.slack.addFile({ ...file, bytes: new TextEncoder().encode("%PDF oops") });
  const send = eventPoster(env);
  const posted = { user: "U3", ts: "1800000008.000001", thread_ts: thread, files: [file] };
  await send(threadEvent("Ev70", thread, { subtype: "file_share", ...posted, text: "" }));
  await agentMessages(env, chat.chatId, (rows) => rows.length === 1, "the file");
  await send(threadEvent("Ev71", thread, {
    subtype: "message_changed",
    message: { ...posted, text: "note: wrong customer's file!" },
    previous_message: { ...posted, text: "" },
  }));
  const rows = await eventually(
    () =>
      env.db.sql`
      SELECT message_type, internal FROM messages
      WHERE conversation_id = ${chat.chatId} AND sender_type = 'agent' ORDER BY id`,
    (found) => found.length === 2 && found.every((row) => row.internal),
    "the note added and the file made internal",
  );
  assert.deepEqual(rows.map((row) => row.message_type), ["file", "text"]);
  const seen = await visitorHistory(env, chat);
  assert.deepEqual(seen, ["The file?"]);
});

Deno.test("an edit giving a file-only reply text adds it; one removing the text keeps the files", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "The form?");
  const thread = await threadTs(env);
  const file = { id: "F0FORM", name: "form.pdf", mimetype: "application/pdf" };
  env.slack.addFile({ ...file, bytes: new TextEncoder().encode("%PDF form") });
  const send = eventPoster(env);
  const ts = "1800000005.000001";
  const posted = { user: "U3", ts, thread_ts: thread, files: [file] };
  await send(threadEvent("Ev50", thread, { subtype: "file_share", ...posted, text: "" }));
  await agentMessages(env, chat.chatId, (rows) => rows.length === 1, "the file");
  const edit = (id: string, text: string) =>
    send(threadEvent(id, thread, {
      subtype: "message_changed",
      message: { ...posted, text },
      previous_message: { ...posted, text: "" },
    }));
  const visible = (rows: Record<string, unknown>[]) =>
    rows.filter((row) => !row.deleted).map((row) => `${row.message_type} ${row.content}`);
  await edit("Ev51", "Fill in page 2");
  let rows = await agentMessages(env, chat.chatId, (r) => r.length === 2, "the text added");
  assert.deepEqual(visible(rows).slice(1), ["text Fill in page 2"]);
  const history = () => visitorHistory(env, chat);
  assert.equal((await history()).at(-1), "Fill in page 2", "the visitor has the text");
  await edit("Ev52", "Fill in pages 2 and 3");
  rows = await agentMessages(
    env,
    chat.chatId,
    (r) => r[1]?.content === "Fill in pages 2 and 3",
    "the added text edited",
  );
  assert.equal(rows.length, 2, "edited in place, not added again");
  await edit("Ev53", "");
  rows = await agentMessages(env, chat.chatId, (r) => r[1]?.deleted === true, "the text removed");
  assert.equal(visible(rows).length, 1);
  assert.match(visible(rows)[0], /^file .*form\.pdf/);
  await edit("Ev54", "Page 3 only");
  rows = await agentMessages(env, chat.chatId, (r) => r.length === 3, "text given again");
  assert.deepEqual(visible(rows).slice(1), ["text Page 3 only"]);
  await send(threadEvent("Ev55", thread, { subtype: "message_deleted", deleted_ts: ts }));
  rows = await agentMessages(
    env,
    chat.chatId,
    (r) => r.every((row) => row.deleted),
    "the whole reply deleted",
  );
  assert.deepEqual(await history(), ["The form?"]);
});

Deno.test("deleting the bot's copy of a visitor's message erases nothing; a reply edited into a note leaves the visitor", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "My own words");
  const thread = await threadTs(env);
  const [mirror] = await eventually(
    () => env.db.sql`SELECT ts FROM slack_messages WHERE message_id = ${chat.messageId}`,
    (rows) => rows.length === 1,
    "the visitor's message mirrored",
  );
  const { frames, close } = await openVisitorSocket(env, chat.token);
  const send = eventPoster(env);
  await send(threadEvent("Ev20", thread, {
    subtype: "message_deleted",
    deleted_ts: mirror.ts,
    previous_message: { bot_id: "B1", text: "My own words", ts: mirror.ts },
  }));
  await send(threadEvent("Ev21", thread, { subtype: "message_deleted", deleted_ts: mirror.ts }));
  await send(threadEvent("Ev22", thread, { user: "U2", text: "Visible", ts: "1800000002.000001" }));
  const [reply] = await agentMessages(env, chat.chatId, (rows) => rows.length === 1, "the reply");
  await send(threadEvent("Ev23", thread, {
    subtype: "message_changed",
    message: { user: "U2", text: "note: secret", ts: "1800000002.000001", thread_ts: thread },
    previous_message: { user: "U2", text: "Visible", ts: "1800000002.000001" },
  }));
  await eventually(
    () => env.db.sql`SELECT internal, content FROM messages WHERE id = ${reply.id}`,
    ([row]) => row.internal === true,
    "the reply made internal",
  );
  await waitUntil(() => frames.some((frame) => frame.type === "message.deleted"), "the removal");
  await send(
    threadEvent("Ev24", thread, { user: "U2", text: "Visible again", ts: "1800000003.000001" }),
  );
  await waitUntil(
    () => frames.some((frame) => frame.message?.content === "Visible again"),
    "the second reply",
  );
  // A note edited (even out of its `note:`), and a note deleted, are nothing to the visitor, who
  // never had them.
  await send(threadEvent("Ev25", thread, {
    subtype: "message_changed",
    message: { user: "U2", text: "still secret", ts: "1800000002.000001", thread_ts: thread },
    previous_message: { user: "U2", text: "note: secret", ts: "1800000002.000001" },
  }));
  await send(
    threadEvent("Ev26", thread, { user: "U2", text: "note: aside", ts: "1800000004.000001" }),
  );
  await send(threadEvent("Ev27", thread, {
    subtype: "message_deleted",
    deleted_ts: "1800000004.000001",
    previous_message: { user: "U2", text: "note: aside", ts: "1800000004.000001" },
  }));
  await send(threadEvent("Ev28", thread, {
    subtype: "message_changed",
    message: { user: "U2", text: "Visible, edited", ts: "1800000003.000001", thread_ts: thread },
    previous_message: { user: "U2", text: "Visible again", ts: "1800000003.000001" },
  }));
  await waitUntil(
    () => frames.some((frame) => frame.message?.content === "Visible, edited"),
    "the last edit",
  );
  await close();
  // A socket that comes back after all this is told the reply it saw is gone, and nothing of notes.
  const since = frames.find((frame) => frame.message?.content === "Visible")!.message!.created_at!;
  const back = await openVisitorSocket(env, chat.token, since);
  await waitUntil(
    () => back.frames.some((frame) => frame.message?.content === "Visible, edited"),
    "the replay",
  );
  await back.close();
  const [aside] = await env.db.sql`
    SELECT id FROM messages WHERE content = 'note: aside' AND conversation_id = ${chat.chatId}`;
  assert.ok(
    back.frames.some((frame) => frame.type === "message.deleted" && frame.message?.id === reply.id),
    "the reply made a note is gone on the socket that came back",
  );
  assert.ok(!back.frames.some((frame) => frame.message?.id === Number(aside.id)), "a note's id");
  assert.ok(!back.frames.some((frame) => /note:|secret/.test(frame.message?.content ?? "")));

  assert.deepEqual(
    frames.filter((frame) => frame.type.startsWith("message.")).map((frame) =>
      `${frame.type} ${frame.message?.content ?? ""}`.trim()
    ),
    [
      "message.created Visible",
      "message.deleted",
      "message.created Visible again",
      "message.updated Visible, edited",
    ],
  );
  const notes = await env.db.sql`
    SELECT content, deleted_at IS NOT NULL AS deleted FROM messages
    WHERE conversation_id = ${chat.chatId} AND internal ORDER BY id`;
  assert.deepEqual(notes.map((note) => [note.content, note.deleted]), [
    ["still secret", false],
    ["note: aside", true],
  ]);
  const [visitorMessage] = await env.db.sql`
    SELECT deleted_at FROM messages WHERE id = ${chat.messageId}`;
  assert.equal(visitorMessage.deleted_at, null);
  const seen = await visitorHistory(env, chat);
  assert.deepEqual(seen, ["My own words", "Visible, edited"]);
});

/**
 * Has a member share `file` in the thread of a new visitor conversation; resolves to the media
 * proxy link of the message it became.
 */
async function shareFile(
  env: Env,
  file: Parameters<FakeSlack["addFile"]>[0],
  eventId: string,
): Promise<{ message: Record<string, unknown>; link: URL }> {
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Can I see it?");
  const thread = await threadTs(env);
  env.slack.addFile(file);
  const res = await env.slack.postEvent(
    `${env.server.baseUrl}/api/v1/slack/events`,
    threadEvent(eventId, thread, {
      subtype: "file_share",
      user: "U3",
      text: "",
      ts: `1800000002.0000${eventId.slice(-2)}`,
      files: [{ id: file.id, name: file.name, mimetype: file.mimetype }],
    }),
  );
  await res.body?.cancel();
  const [message] = await agentMessages(
    env,
    chat.chatId,
    (current) => current.length >= 1,
    "the file's message",
  );
  return { message, link: new URL((message.payload as { url: string }).url) };
}

Deno.test("a file an agent attaches in Slack reaches the visitor through the signed media proxy", async () => {
  await using env = await setUp();
  const bytes = new TextEncoder().encode("\x89PNG screenshot");
  const { message: image, link } = await shareFile(
    env,
    { id: "F0SHOT", name: "shot.png", mimetype: "image/png", bytes },
    "Ev20",
  );
  assert.equal(image.message_type, "image");
  assert.equal(link.pathname, "/api/v1/slack/media/F0SHOT");
  const proxied = await fetch(`${env.server.baseUrl}${link.pathname}${link.search}`);
  assert.equal(proxied.status, 200);
  assert.equal(proxied.headers.get("content-type"), "image/png");
  assert.deepEqual(new Uint8Array(await proxied.arrayBuffer()), bytes);
  const unsigned = await fetch(`${env.server.baseUrl}${link.pathname}`);
  assert.equal(unsigned.status, 403);
  await unsigned.body?.cancel();
  const tampered = await fetch(`${env.server.baseUrl}/api/v1/slack/media/F0OTHER${link.search}`);
  assert.equal(tampered.status, 403);
  await tampered.body?.cancel();
});

Deno.test("the media proxy answers 503 with Retry-After when Slack limits files.info, 502 when Slack fails, and holds no reply", async () => {
  await using env = await setUp();
  const bytes = new TextEncoder().encode("%PDF terms");
  const { link } = await shareFile(
    env,
    { id: "F0TERMS", name: "terms.pdf", mimetype: "application/pdf", bytes },
    "Ev22",
  );
  const url = `${env.server.baseUrl}${link.pathname}${link.search}`;
  env.slack.queue("files.info", {
    status: 429,
    headers: { "retry-after": "30" },
    body: { ok: false, error: "ratelimited" },
  });
  const started = performance.now();
  const limited = await fetch(url);
  assert.equal(limited.status, 503);
  assert.equal(limited.headers.get("retry-after"), "30");
  assert.equal((await limited.json()).message, "Slack is limiting file lookups: try again later");
  assert.ok(performance.now() - started < 5_000, "answered without waiting out Retry-After");
  // An agent's reply meanwhile (a new member: users.info) reaches the visitor at once.
  env.slack.addUser({ id: "U9", displayName: "Noor" });
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Terms?");
  const thread = await eventually(
    () => env.db.sql`SELECT thread_ts FROM slack_threads WHERE conversation_id = ${chat.chatId}`,
    (rows) => rows.length === 1,
    "the second conversation mirrored",
  );
  await eventPoster(env)(
    threadEvent("Ev23", thread[0].thread_ts, { user: "U9", text: "Here", ts: "1800000007.000001" }),
  );
  await agentMessages(env, chat.chatId, (rows) => rows.length === 1, "Noor's reply");
  for (let i = 0; i < 3; i++) {
    env.slack.queue("files.info", { status: 500, body: "Internal Server Error" });
  }
  const failed = await fetch(url);
  assert.equal(failed.status, 502);
  assert.equal((await failed.json()).message, "Slack did not answer");
  env.slack.queue("files.info", { status: 200, body: { ok: false, error: "service_unavailable" } });
  const unavailable = await fetch(url);
  assert.equal(unavailable.status, 502);
  await unavailable.body?.cancel();
  const served = await fetch(url);
  assert.equal(served.status, 200);
  assert.deepEqual(new Uint8Array(await served.arrayBuffer()), bytes);
});

Deno.test("a Slack file whose url_private is on another host is refused 403, the bot token kept", async () => {
  await using env = await setUp();
  // Another host, which must never see the bot token.
  const seen: string[] = [];
  await using foreign = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen: () => {} },
    (req) => {
      seen.push(req.headers.get("authorization") ?? "");
      return new Response("bytes");
    },
  );
  const { link } = await shareFile(env, {
    id: "F0AWAY",
    name: "away.png",
    mimetype: "image/png",
    bytes: new Uint8Array(),
    urlPrivate: `http://localhost:${foreign.addr.port}/away.png`,
  }, "Ev21");
  const proxied = await fetch(`${env.server.baseUrl}${link.pathname}${link.search}`);
  assert.equal(proxied.status, 403);
  assert.equal((await proxied.json()).message, "File is not on a Slack file host");
  assert.deepEqual(seen, []);
});

/**
 * Installs the app, mirrors a first conversation (its root and "one"), then has Slack answer the
 * next `chat.postMessage` 429 with `Retry-After: retryAfterSeconds`; resolves to that conversation.
 */
async function mirroredThenRateLimited(env: Env, retryAfterSeconds: number) {
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "one");
  await waitUntil(() => posts(env.slack).length >= 2, "the root and the first message");
  env.slack.queue("chat.postMessage", {
    status: 429,
    headers: { "retry-after": String(retryAfterSeconds) },
    body: { ok: false, error: "ratelimited" },
  });
  return chat;
}

Deno.test("the mirror keeps a conversation's order through Slack's 429", async () => {
  await using env = await setUp();
  const chat = await mirroredThenRateLimited(env, 1);
  for (const content of ["two", "three", "four"]) {
    const sent = await apiCall(env.server.baseUrl, "/messages", {
      key: env.app.key,
      json: { chat_id: chat.chatId, content },
    });
    assert.equal(sent.status, 200);
  }
  await waitUntil(
    () => posts(env.slack).some((call) => call.params.text === "four"),
    "all four mirrored",
    10_000,
  );
  // The fake records the refused attempt too: the 429'd post comes again, then the rest in order.
  const texts = posts(env.slack).filter((call) => call.params.thread_ts).map((call) =>
    call.params.text
  );
  assert.deepEqual(texts, ["one", "two", "two", "three", "four"]);
});

Deno.test("a long Retry-After sends the post back to the outbox and holds the workspace's other posts", async () => {
  await using env = await setUp();
  const first = await mirroredThenRateLimited(env, 700);
  const reply = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: first.chatId, content: "two" },
  });
  assert.equal(reply.status, 200);
  const pending = (content: string) =>
    env.db.sql`
      SELECT o.state, o.attempts, o.last_error,
        extract(epoch FROM o.run_at - clock_timestamp())::float8 AS due_in
      FROM outbox o
      JOIN messages m ON m.app_id = o.app_id AND m.id = (o.payload ->> 'message_id')::bigint
      WHERE o.kind = 'slack' AND m.content = ${content}`;
  const [two] = await eventually(
    () => pending("two"),
    (rows) => rows[0]?.last_error === "Slack: ratelimited",
    "the 429 recorded",
  );
  // Back in the outbox at once, for Retry-After (and up to a fifth more), using no attempt.
  assert.deepEqual([two.state, two.attempts], ["pending", 0]);
  assert.ok(two.due_in > 690 && two.due_in <= 841, String(two.due_in));
  // Another conversation of the workspace waits too (its first post), without asking Slack.
  const calls = posts(env.slack).length;
  const other = await createVisitorChat(env.server.baseUrl, env.app.publicId, "someone else");
  const [held] = await eventually(
    () =>
      env.db.sql`
        SELECT o.attempts, o.last_error,
          extract(epoch FROM o.run_at - clock_timestamp())::float8 AS due_in
        FROM outbox o
        WHERE o.kind = 'slack' AND (o.payload ->> 'conversation_id')::bigint = ${other.chatId}
        ORDER BY o.id LIMIT 1`,
    (rows) => rows[0]?.last_error === "Slack: ratelimited",
    "the other conversation held back",
  );
  assert.equal(held.attempts, 0);
  assert.ok(held.due_in > 600, String(held.due_in));
  assert.equal(posts(env.slack).length, calls, "no post while the workspace is paused");
});

/**
 * A visitor's conversation mirrored in a thread, and a sender of signed events that asserts each
 * is acknowledged.
 */
async function mirroredChat(env: Env) {
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  const thread = await threadTs(env);
  const events = `${env.server.baseUrl}/api/v1/slack/events`;
  const send = async (body: unknown) => {
    const res = await env.slack.postEvent(events, body);
    assert.equal(res.status, 200, await res.text());
  };
  return { chat, thread, send };
}

Deno.test("a malformed event in a mirrored thread changes nothing and holds nothing up", async () => {
  await using env = await setUp();
  const { chat, thread, send } = await mirroredChat(env);
  // Signed, in a mapped thread, from a member — but without a ts, or with one of another type.
  await send(threadEvent("Ev40", thread, { user: "U2", text: "no ts" }));
  await send(threadEvent("Ev41", thread, { user: "U2", text: "numeric ts", ts: 1800000002 }));
  await send(threadEvent("Ev42", thread, { user: "U2", text: "fine", ts: "1800000002.000003" }));
  const rows = await agentMessages(env, chat.chatId, (current) => current.length >= 1, "a reply");
  assert.deepEqual(rows.map((row) => row.content), ["fine"]);
  // The application still commits at once: nothing holds its lock.
  const started = performance.now();
  const res = await fetch(`${env.server.baseUrl}/api/v1/widget/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${chat.token}`, "content-type": "application/json" },
    body: JSON.stringify({ content: "still here" }),
  });
  assert.equal(res.status, 200, await res.text());
  assert.ok(performance.now() - started < 5_000);
  // This test's database only (other files run beside it); a batch between its pipelined
  // statements may show so for an instant, one holding its locks for good does not pass.
  const stuck = await eventually(
    () =>
      env.db.sql`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE state = 'idle in transaction' AND datname = current_database()`,
    (result) => result[0].n === 0,
    "no session idle in a transaction",
  );
  assert.equal(stuck[0].n, 0);
  // Every delivery was applied (the malformed ones as nothing), none left for recovery.
  const unapplied = await eventually(
    () => env.db.sql`SELECT count(*)::int AS n FROM slack_deliveries WHERE processed_at IS NULL`,
    (result) => result[0].n === 0,
    "every delivery applied",
  );
  assert.equal(unapplied[0].n, 0);
});

Deno.test("a signed event naming ids no Slack request has (a NUL, 256 characters) is acknowledged and changes nothing", async () => {
  await using env = await setUp();
  const { chat, thread, send } = await mirroredChat(env);
  const reply = (id: string, ts: string, fields: Record<string, unknown> = {}) =>
    threadEvent(id, thread, { user: "U2", text: `reply ${id}`, ts, ...fields });
  const long = "1".repeat(256);
  await send(reply("Ev50", "1800000003.000001", { channel: `${CHANNEL}\u0000` }));
  await send(reply("Ev\u000051", "1800000003.000002"));
  await send(reply(`Ev${long}`, "1800000003.000003"));
  await send(reply("Ev53", "1800000003.00000\u00004"));
  await send(reply("Ev54", long));
  await send(reply("Ev55", "1800000003.000005", { user: "U\u00002" }));
  await send({ ...reply("Ev56", "1800000003.000006"), team_id: `${TEAM}\u0000` });
  await send(reply("Ev57", "1800000003.000007", { thread_ts: `${thread}\ud800` }));
  await send(reply("Ev58", "1800000003.000008"));
  // A file's type is platform text: kept as PostgreSQL can store it, the reply with it.
  const file = (id: string, mimetype: string) => ({ id, name: `${id}.png`, mimetype });
  await send(reply("Ev59", "1800000003.000009", {
    subtype: "file_share",
    files: [file("F1", "image/png\u0000"), file("F2", "image/png\ud800")],
  }));
  const rows = await agentMessages(env, chat.chatId, (current) => current.length >= 4, "replies");
  assert.deepEqual(rows.slice(0, 2).map((row) => row.content), ["reply Ev58", "reply Ev59"]);
  assert.deepEqual(
    rows.slice(2).map((row) => JSON.parse(String(row.content)).mime_type),
    ["image/png\uFFFD", "image/png\uFFFD"],
  );
  const unapplied = await eventually(
    () =>
      env.db.sql`
      SELECT count(*)::int AS n, count(*) FILTER (WHERE attempts > 0)::int AS failed
      FROM slack_deliveries WHERE processed_at IS NULL`,
    ([result]) => result.n === 0,
    "every delivery applied, none left for recovery",
  );
  assert.deepEqual({ ...unapplied[0] }, { n: 0, failed: 0 });
  const [stored] = await env.db.sql`SELECT count(*)::int AS n FROM slack_deliveries`;
  assert.equal(stored.n, 10, "every one was stored before its answer");
});

Deno.test("a thread reply reaches the visitor as the agent saw it: no escapes, links and mentions readable", async () => {
  await using env = await setUp();
  await install(env);
  env.slack.addUser({ id: "U1", displayName: "Ana" });
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  const thread = await threadTs(env);
  const res = await env.slack.postEvent(
    `${env.server.baseUrl}/api/v1/slack/events`,
    threadEvent("Ev50", thread, {
      user: "U1",
      text: "a &lt; b &amp; c, ask <@U1> or see <https://x.io/p?a=1&amp;b=2|the docs>",
      ts: "1800000003.000001",
    }),
  );
  assert.equal(res.status, 200);
  await res.body?.cancel();
  const rows = await agentMessages(env, chat.chatId, (current) => current.length >= 1, "the reply");
  assert.deepEqual(rows.map((row) => row.content), [
    "a < b & c, ask @Ana or see the docs (https://x.io/p?a=1&b=2)",
  ]);
});

Deno.test("a message posted in several parts goes on from the part that failed, never posting one twice", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "one");
  await waitUntil(() => posts(env.slack).length >= 2, "the root and the first message");
  // 3,000 "&" are 15,000 characters once escaped for Slack: two posts. The first lands, the
  // second meets an error Slack asks to retry.
  env.slack.queue(
    "chat.postMessage",
    { body: { ok: true, channel: "C1", ts: "1800000099.000001" } },
    { body: { ok: false, error: "internal_error" } },
  );
  const sent = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: chat.chatId, content: `A${"&".repeat(2_998)}Z` },
  });
  assert.equal(sent.status, 200);
  const long = () =>
    posts(env.slack).filter((call) => String(call.params.text ?? "").includes("&amp;"));
  await waitUntil(() => long().length >= 3, "the failed part posted again", 15_000);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const [first, failed, again] = long().map((call) => JSON.stringify(call.params));
  assert.equal(long().length, 3, "the first part is not posted again");
  assert.equal(failed, again);
  assert.ok(String(long()[0].params.text).startsWith("A"));
  assert.ok(!String(long()[2].params.text).startsWith("A"));
  assert.notEqual(first, again);
  const [row] = await env.db.sql`
    SELECT ts, parts FROM slack_messages WHERE message_id = ${sent.json.data.message_id}`;
  assert.deepEqual({ ...row }, { ts: "1800000099.000001", parts: 2 });
});

Deno.test("Slack events acknowledged but not applied before a crash are applied at the next start", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Anyone there?");
  const thread = await threadTs(env);
  const replies = Array.from({ length: 150 }, (_, i) => `Reply #${i}`);
  const bodies = replies.map((text, i) =>
    JSON.stringify(
      threadEvent(`EvCrash${i}`, thread, { user: "U2", text, ts: `1800000100.${1000 + i}` }),
    )
  );
  // Stored a moment before the crash: more than one page of them, not yet a minute old.
  await env.db.sql`
    INSERT INTO slack_deliveries (kind, body, received_at)
    SELECT 'event', convert_to(body, 'UTF8'), clock_timestamp() - interval '1 second'
    FROM unnest(${bodies}::text[]) WITH ORDINALITY AS d(body, n) ORDER BY n`;
  await using restarted = await startTestServer(env.db.url, {
    SLACK_SIGNING_SECRET: SIGNING_SECRET,
    SLACK_API_URL: env.slack.apiUrl,
  });
  assert.ok(restarted.baseUrl);
  const rows = await agentMessages(
    env,
    chat.chatId,
    (current) => current.length === replies.length,
    "every stored reply",
  );
  assert.deepEqual(rows.map((row) => row.content), replies);
});

Deno.test("Slack's legacy verification token is never stored: its requests are applied without it", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hi");
  const thread = await threadTs(env);
  const legacyToken = "Jhj5dZrVaK7ZwHHjRyZWjbDl";
  const reply = {
    token: legacyToken,
    ...threadEvent("EvToken", thread, { user: "U1", text: "Hello", ts: "1800000200.000001" }),
  };
  const answered = await env.slack.postEvent(`${env.server.baseUrl}/api/v1/slack/events`, reply);
  assert.equal(answered.status, 200);
  await answered.body?.cancel();
  const clicked = await env.slack.postAction(`${env.server.baseUrl}/api/v1/slack/actions`, {
    token: legacyToken,
    ...blockActions([closeAction(chat.chatId, String(chat.chatId))]),
  });
  assert.equal(clicked.status, 200);
  await clicked.body?.cancel();

  await agentMessages(env, chat.chatId, (rows) => rows.length === 1, "the reply");
  await eventually(
    () => env.db.sql`SELECT status FROM conversations WHERE id = ${chat.chatId}`,
    ([row]) => row.status === "closed",
    "the conversation closed",
  );
  const stored = await env.db.sql`
    SELECT kind, convert_from(body, 'UTF8') AS body FROM slack_deliveries ORDER BY id`;
  assert.deepEqual(stored.map((row) => row.kind), ["event", "action"]);
  for (const row of stored) assert.ok(!row.body.includes(legacyToken), row.body);
});

Deno.test("a root post a member deleted holds nothing up: its status is skipped, the thread goes on", async () => {
  await using env = await setUp();
  await install(env);
  const chat = await createVisitorChat(env.server.baseUrl, env.app.publicId, "Hello");
  await threadTs(env);
  // Slack's answer to updating a deleted message, for as long as anyone asks.
  const gone = { body: { ok: false, error: "message_not_found" } };
  env.slack.queue("chat.update", gone, gone, gone, gone);
  const closed = await env.slack.postAction(
    `${env.server.baseUrl}/api/v1/slack/actions`,
    blockActions([closeAction(chat.chatId, String(chat.chatId))]),
  );
  await closed.body?.cancel();
  await eventually(
    () => env.db.sql`SELECT status FROM conversations WHERE id = ${chat.chatId}`,
    ([current]) => current.status === "closed",
    "the conversation closed",
  );
  const reply = await apiCall(env.server.baseUrl, "/messages", {
    key: env.app.key,
    json: { chat_id: chat.chatId, content: "after the root went" },
  });
  assert.equal(reply.status, 200);
  // Retried as if Slack might find it again, the root's update held the reply back for minutes.
  await waitUntil(
    () => posts(env.slack).some((call) => call.params.text === "after the root went"),
    "the reply in the thread",
    5_000,
  );
  assert.ok(env.slack.calls.some((call) => call.method === "chat.update"));
  // Every send done, none given up or waiting for a retry.
  const sends = await eventually(
    () => env.db.sql`SELECT state, last_error FROM outbox WHERE kind = 'slack'`,
    (rows) => rows.every((row) => row.state === "succeeded"),
    "every Slack send done",
  );
  assert.deepEqual(sends.filter((row) => row.last_error !== null), []);
});
