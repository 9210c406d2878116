/**
 * The Slack inbound benchmark of `deno task bench` (issue 7): a fake Slack (tests/support) in
 * the bench process, one application installed into its workspace through the real install flow
 * (install link, consent redirect, OAuth state cookie, `oauth.v2.access`), visitor conversations
 * mirrored as threads, and Events API deliveries of thread replies from workspace members —
 * each signed as Slack signs them — whose application is measured by polling the database.
 *
 * As for WhatsApp, the bodies of the load are signed before the measured window
 * ({@linkcode eventRequests}): each carries the timestamp it was signed at (Slack's
 * `X-Slack-Request-Timestamp`), seconds before it is sent, well within the 5 minutes Parley
 * accepts; one that waited longer than a minute in the pool, and any past the pool, is signed
 * as it goes.
 */
import type { LoadRequest } from "./load.ts";
import { executeCommand } from "../src/cli.ts";
import { connect, type Sql } from "../src/db/client.ts";
import { type DatabaseLocation, openDatabase } from "../src/db/database.ts";
import { slackSignature } from "../src/channels/slack/signature.ts";
import { type FakeSlack, startFakeSlack } from "../tests/support/fake_slack.ts";

/** The ack scenario's name in the table. */
export const SLACK_SCENARIO = "POST /api/v1/slack/events (ack)";

const CLIENT_ID = "1000000001.2000000002";
const CLIENT_SECRET = "bench-slack-client-secret";
const SIGNING_SECRET = "bench-slack-signing-secret";
const TEAM_ID = "T0BENCH01";
const CHANNEL_ID = "C0BENCH01";
const SLACK_APP_ID = "A0PARLEY01";
/** Pooled requests signed longer ago than this are signed again when sent. */
const MAX_POOLED_AGE_SECONDS = 60;

/** Starts the fake Slack that plays the Parley app; Parley is given {@linkcode slackEnv}. */
export function startBenchSlack(): Promise<FakeSlack> {
  return startFakeSlack({
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    signingSecret: SIGNING_SECRET,
  });
}

/** Parley's Slack configuration for `fake`, reached at `publicBaseUrl`. */
export function slackEnv(fake: FakeSlack, publicBaseUrl: string): Record<string, string> {
  return {
    SLACK_CLIENT_ID: CLIENT_ID,
    SLACK_CLIENT_SECRET: CLIENT_SECRET,
    SLACK_SIGNING_SECRET: SIGNING_SECRET,
    SLACK_API_URL: fake.apiUrl,
    SLACK_AUTHORIZE_URL: fake.authorizeUrl,
    PUBLIC_BASE_URL: publicBaseUrl,
  };
}

/** An installed workspace, its mirrored threads and members, and a connection to the database. */
export interface SlackBench extends AsyncDisposable {
  appId: number;
  sql: Sql;
  /** The `thread_ts` of each mirrored conversation. */
  threads: string[];
  /** Member user ids that `users.info` describes. */
  members: string[];
}

async function pause(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Creates an application, installs it into the fake workspace through Parley's install flow
 * (Parley at `parley`, which must be its `PUBLIC_BASE_URL`), opens `threads` visitor
 * conversations and waits (60 s at most) until the mirror made a thread of each, and adds
 * `members` workspace members.
 */
export async function setUpSlack(
  dataDir: string,
  parley: string,
  fake: FakeSlack,
  threads: number,
  members = 5,
): Promise<SlackBench> {
  const database: DatabaseLocation = await openDatabase({ databaseUrl: null, dataDir });
  const sql = connect(database.url, { max: 1 });
  const close = async () => {
    await sql.end();
    await database.close();
  };
  try {
    const app = await executeCommand(sql, {
      command: "app:create",
      flags: { name: "Bench Slack" },
    }) as { id: number; public_id: string };
    await install(sql, parley, fake, app.id);

    for (let i = 0; i < threads; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, threads - i) }, async (_, j) => {
          const res = await fetch(`${parley}/api/v1/widget/${app.public_id}/visitors`, {
            method: "POST",
          });
          if (!res.ok) throw new Error(`POST visitors: ${res.status} ${await res.text()}`);
          const token = (await res.json()).data.visitor_token as string;
          const sent = await fetch(`${parley}/api/v1/widget/messages`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ content: `Hello from visitor ${i + j}` }),
          });
          if (!sent.ok) throw new Error(`POST messages: ${sent.status} ${await sent.text()}`);
          await sent.body?.cancel();
        }),
      );
    }
    const started = performance.now();
    let rows: { thread_ts: string }[] = [];
    for (;;) {
      rows = await sql<{ thread_ts: string }[]>`
        SELECT thread_ts FROM slack_threads WHERE app_id = ${app.id} ORDER BY conversation_id`;
      if (rows.length >= threads) break;
      if (performance.now() - started > 60_000) {
        throw new Error(`${rows.length} of ${threads} Slack threads mirrored after 60 s`);
      }
      await pause(50);
    }

    const memberIds = Array.from({ length: members }, (_, i) => {
      const id = `U0AGENT${String(i + 1).padStart(2, "0")}`;
      fake.addUser({ id, displayName: `Agent ${i + 1}`, realName: `Bench Agent ${i + 1}` });
      return id;
    });
    return {
      appId: app.id,
      sql,
      threads: rows.map((row) => row.thread_ts),
      members: memberIds,
      [Symbol.asyncDispose]: close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Parley's install flow, as a browser and Slack go through it. */
async function install(sql: Sql, parley: string, fake: FakeSlack, appId: number): Promise<void> {
  const { url } = await executeCommand(sql, {
    command: "slack:install-url",
    flags: { app: String(appId) },
  }, { publicBaseUrl: parley }) as { url: string };
  const begun = await fetch(url, { redirect: "manual" });
  await begun.body?.cancel();
  const location = begun.headers.get("location");
  const cookie = (begun.headers.get("set-cookie") ?? "").split(";")[0];
  const state = location ? new URL(location).searchParams.get("state") : null;
  if (begun.status !== 302 || !state || !cookie) {
    throw new Error(`the install link answered ${begun.status} without a state and a cookie`);
  }
  const code = fake.issueCode({
    teamId: TEAM_ID,
    teamName: "Bench Workspace",
    channelId: CHANNEL_ID,
    redirectUri: `${parley}/api/v1/slack/callback`,
  });
  const query = new URLSearchParams({ code, state });
  const done = await fetch(`${parley}/api/v1/slack/callback?${query}`, {
    redirect: "manual",
    headers: { cookie },
  });
  const text = await done.text();
  if (done.status !== 302) throw new Error(`the install callback answered ${done.status}: ${text}`);
  const [installed] = await sql<{ app_id: number }[]>`
    SELECT app_id FROM slack_installations WHERE team_id = ${TEAM_ID}`;
  if (installed?.app_id !== appId) throw new Error("the install stored no installation");
}

const encoder = new TextEncoder();

/**
 * Event `index` of the load as Slack delivers it: a message of a member in one of the threads
 * (spread over them in turn, members rotating), with an `event_id` and a `ts` of its own.
 */
function eventBody(bench: SlackBench, index: number, baseSeconds: number): string {
  const thread = bench.threads[index % bench.threads.length];
  const user = bench.members[Math.floor(index / bench.threads.length) % bench.members.length];
  const ts = `${baseSeconds + Math.floor(index / 1e6)}.${String(index % 1e6).padStart(6, "0")}`;
  const text = `Benchmark reply ${index}`;
  return JSON.stringify({
    token: "bench-verification-token",
    team_id: TEAM_ID,
    context_team_id: TEAM_ID,
    api_app_id: SLACK_APP_ID,
    event: {
      type: "message",
      user,
      text,
      client_msg_id: crypto.randomUUID(),
      ts,
      team: TEAM_ID,
      blocks: [{
        type: "rich_text",
        block_id: `b${index}`,
        elements: [{ type: "rich_text_section", elements: [{ type: "text", text }] }],
      }],
      thread_ts: thread,
      parent_user_id: "U0BOT0001",
      channel: CHANNEL_ID,
      event_ts: ts,
      channel_type: "channel",
    },
    type: "event_callback",
    event_id: `Ev0BENCH${index}`,
    event_time: Math.floor(Number(ts)),
    authorizations: [{
      enterprise_id: null,
      team_id: TEAM_ID,
      user_id: "U0BOT0001",
      is_bot: true,
      is_enterprise_install: false,
    }],
    is_ext_shared_channel: false,
    event_context: `4-bench-${index}`,
  });
}

/** A request of the load, signed now, and when that was (Unix seconds). */
interface Signed {
  request: LoadRequest;
  at: number;
}

function signedRequest(body: string): Signed {
  const at = Math.floor(Date.now() / 1000);
  return {
    at,
    request: {
      method: "POST",
      path: "/api/v1/slack/events",
      headers: {
        "content-type": "application/json",
        "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        "x-slack-request-timestamp": String(at),
        "x-slack-signature": slackSignature(encoder.encode(body), String(at), SIGNING_SECRET),
      },
      body,
    },
  };
}

/**
 * The load's requests: the first `signed` made (and signed) now, any further one — or one signed
 * more than a minute before it is asked for — signed when asked for. Request `index` is the
 * load's `first + index`-th: loads with different `first` never repeat an event id or a ts.
 */
export function eventRequests(
  bench: SlackBench,
  signed: number,
  first = 0,
): { make: (index: number) => LoadRequest; signedAhead: number; signedLate: () => number } {
  // Message ts after every one the fake Slack gave (mirrored posts are a fraction of a second
  // past its start), increasing with the index.
  const baseSeconds = Math.floor(Date.now() / 1000) + 1;
  const pool: (Signed | undefined)[] = Array.from(
    { length: signed },
    (_, i) => signedRequest(eventBody(bench, first + i, baseSeconds)),
  );
  let late = 0;
  return {
    make(index) {
      const pooled = pool[index];
      if (pooled && Date.now() / 1000 - pooled.at <= MAX_POOLED_AGE_SECONDS) {
        pool[index] = undefined;
        return pooled.request;
      }
      late++;
      return signedRequest(eventBody(bench, first + index, baseSeconds)).request;
    },
    signedAhead: pool.length,
    signedLate: () => late,
  };
}

/** What {@linkcode measureDrain} measured. */
export interface DrainResult {
  deliveries: number;
  /** Agent replies the deliveries stored (one each). */
  replies: number;
  threads: number;
  /** From the call (right after the load) until the last delivery was applied. */
  drainedMs: number;
}

/**
 * Waits (5 minutes at most) until every stored Slack delivery is applied (`processed_at`), and
 * checks that each stored its agent reply, under the member's display name.
 */
export async function measureDrain(bench: SlackBench): Promise<DrainResult> {
  const { sql, appId } = bench;
  const loadEnded = performance.now();
  for (;;) {
    const [{ pending }] = await sql<{ pending: number }[]>`
      SELECT count(*)::int AS pending FROM slack_deliveries WHERE processed_at IS NULL`;
    if (pending === 0) break;
    if (performance.now() - loadEnded > 300_000) {
      throw new Error(`${pending} Slack deliveries still unprocessed 5 minutes after the load`);
    }
    await pause(20);
  }
  const drainedMs = performance.now() - loadEnded;
  const [{ deliveries }] = await sql<{ deliveries: number }[]>`
    SELECT count(*)::int AS deliveries FROM slack_deliveries`;
  // Each reply under its member's display name, as users.info gave it.
  const [{ replies, named }] = await sql<{ replies: number; named: number }[]>`
    SELECT count(*)::int AS replies,
      (count(*) FILTER (WHERE sender_name LIKE 'Agent %'))::int AS named
    FROM messages WHERE app_id = ${appId} AND sender_type = 'agent'`;
  if (replies !== deliveries || named !== replies) {
    throw new Error(
      `${deliveries} Slack deliveries were applied with ${replies} agent replies ` +
        `(${named} under a member's display name)`,
    );
  }
  return { deliveries, replies, threads: bench.threads.length, drainedMs };
}

/** The line printed after the table. */
export function drainLine(result: DrainResult): string {
  return `slack: the load's ${result.deliveries} event deliveries (thread replies of ` +
    `${result.threads} conversations) were all applied ` +
    `${(result.drainedMs / 1000).toFixed(1)} s after it ended, ${result.replies} agent replies ` +
    `stored`;
}
