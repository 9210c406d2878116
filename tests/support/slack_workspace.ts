/** The Slack app the tests run Parley with, and its install into the fake Slack's workspace. */
import assert from "node:assert/strict";
import type { Sql } from "../../src/db/client.ts";
import { executeCommand } from "../../src/cli.ts";
import { type FakeSlack, type FakeSlackInstall, startFakeSlack } from "./fake_slack.ts";

/** The Slack app's credentials the tests configure (and the fake Slack expects). */
export const TEST_SLACK = {
  clientId: "123.456",
  clientSecret: "slack-client-secret",
  signingSecret: "slack-signing-secret",
} as const;

/** The workspace and channel the tests install into. */
export const TEST_WORKSPACE = { teamId: "T0123", channelId: "C0SUPPORT" } as const;

/** The public base URL the tests give Parley (links and redirects name it). */
export const PUBLIC_BASE_URL = "http://parley.test";

/** Starts the fake Slack for {@linkcode TEST_SLACK}. */
export function startTestSlack(): Promise<FakeSlack> {
  return startFakeSlack({ ...TEST_SLACK });
}

/**
 * Parley's environment for `slack`: {@linkcode TEST_SLACK}'s credentials, with `signingSecret`
 * (none when null) as the signing secret.
 */
export function slackServerEnv(
  slack: FakeSlack,
  signingSecret: string | null = TEST_SLACK.signingSecret,
): Record<string, string> {
  return {
    SLACK_CLIENT_ID: TEST_SLACK.clientId,
    SLACK_CLIENT_SECRET: TEST_SLACK.clientSecret,
    ...(signingSecret === null ? {} : { SLACK_SIGNING_SECRET: signingSecret }),
    SLACK_API_URL: slack.apiUrl,
    SLACK_AUTHORIZE_URL: slack.authorizeUrl,
    PUBLIC_BASE_URL,
  };
}

/** A single-use install link for application `appId`, rebased on the server at `baseUrl`. */
export async function installLink(sql: Sql, baseUrl: string, appId: number): Promise<string> {
  const { url } = await executeCommand(sql, {
    command: "slack:install-url",
    flags: { app: String(appId) },
  }, { publicBaseUrl: PUBLIC_BASE_URL }) as { url: string };
  assert.match(url, /^http:\/\/parley\.test\/api\/v1\/slack\/install\?ticket=[0-9a-f]{64}$/);
  return url.replace(PUBLIC_BASE_URL, baseUrl);
}

/**
 * Installs application `appId` into {@linkcode TEST_WORKSPACE} through the install flow;
 * `workspace` overrides what the fake Slack says of it (e.g. its organisation).
 */
export async function installSlack(
  sql: Sql,
  baseUrl: string,
  slack: FakeSlack,
  appId: number,
  workspace: FakeSlackInstall = {},
): Promise<void> {
  const started = await fetch(await installLink(sql, baseUrl, appId), { redirect: "manual" });
  await started.body?.cancel();
  assert.equal(started.status, 302);
  const state = new URL(started.headers.get("location")!).searchParams.get("state")!;
  const cookie = (started.headers.get("set-cookie") ?? "").split(";")[0];
  const code = slack.issueCode({
    ...TEST_WORKSPACE,
    ...workspace,
    redirectUri: `${PUBLIC_BASE_URL}/api/v1/slack/callback`,
  });
  const done = await fetch(`${baseUrl}/api/v1/slack/callback?code=${code}&state=${state}`, {
    redirect: "manual",
    headers: { cookie },
  });
  await done.body?.cancel();
  assert.equal(done.status, 302);
  assert.equal(done.headers.get("location"), `${PUBLIC_BASE_URL}/dashboard`);
}
