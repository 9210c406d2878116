/**
 * Installing the Slack app into a workspace (CONTRACT §6.2): a single-use ticket starts it, an
 * OAuth `state` bound to a cookie carries it through Slack's consent screen, and the callback
 * exchanges the code (`oauth.v2.access`), learns the bot's ids (`auth.test`), joins the channel
 * picked on the consent screen and stores the installation with its secrets sealed. Every
 * refusal is an `AppError` 400 and stores nothing.
 */
import type { Sql } from "../../db/client.ts";
import {
  insertInstallTicket,
  insertOAuthState,
  replaceInstallation,
  type SlackInstallation,
  useInstallTicket,
  useOAuthState,
} from "../../db/slack_installations.ts";
import type { SecretBox } from "../../crypto/secret_box.ts";
import { randomHex, sha256Bytes } from "../../crypto/tokens.ts";
import { AppError } from "../../domain/app_error.ts";
import { createSlackWebClient, slackErrorOf } from "./web_client.ts";

/** The bot scopes Parley asks for (CONTRACT §6.2). */
export const SLACK_BOT_SCOPES = [
  "chat:write",
  "chat:write.customize",
  "channels:history",
  "groups:history",
  "channels:join",
  "users:read",
  "users:read.email",
  "files:read",
  "incoming-webhook",
] as const;

/** The cookie that binds a state to the browser that started the install. */
export const SLACK_STATE_COOKIE = "parley_slack_state";

/** What the installer needs. */
export interface SlackInstallerDeps {
  sql: Sql;
  secretBox: SecretBox;
  publicBaseUrl: string;
  slack: {
    clientId: string | null;
    clientSecret: string | null;
    signingSecret: string | null;
    apiUrl: string;
    authorizeUrl: string;
  };
}

function notConfigured(): AppError {
  return new AppError(400, "Slack is not configured on this server");
}

/** Where Slack sends the browser back. */
export function slackRedirectUri(publicBaseUrl: string): string {
  return `${publicBaseUrl}/api/v1/slack/callback`;
}

/** Creates a single-use install link for `appId`, valid 10 minutes. */
export async function createInstallUrl(sql: Sql, publicBaseUrl: string, appId: number) {
  const ticket = randomHex(32);
  await insertInstallTicket(sql, sha256Bytes(ticket), appId);
  return `${publicBaseUrl}/api/v1/slack/install?ticket=${ticket}`;
}

/**
 * Starts an install from a ticket: consumes it and answers the state (for the cookie) and the
 * authorize URL to redirect to.
 * @throws {AppError} 400 for a missing, used or expired ticket, or Slack not configured.
 */
export async function beginInstall(
  deps: SlackInstallerDeps,
  ticket: string | undefined,
): Promise<{ state: string; location: string }> {
  const { clientId, clientSecret, signingSecret } = deps.slack;
  if (!clientId || !clientSecret || !signingSecret) throw notConfigured();
  if (!ticket || !/^[0-9a-f]{64}$/.test(ticket)) throw new AppError(400, "Invalid install link");
  const appId = await useInstallTicket(deps.sql, sha256Bytes(ticket));
  if (appId === null) throw new AppError(400, "This install link is used or expired");
  const state = randomHex(32);
  await insertOAuthState(deps.sql, sha256Bytes(state), appId);
  const location = new URL(deps.slack.authorizeUrl);
  location.searchParams.set("client_id", clientId);
  location.searchParams.set("scope", SLACK_BOT_SCOPES.join(","));
  location.searchParams.set("redirect_uri", slackRedirectUri(deps.publicBaseUrl));
  location.searchParams.set("state", state);
  return { state, location: location.toString() };
}

/** What Slack's redirect brought back. */
export interface CallbackQuery {
  code?: string;
  state?: string;
  error?: string;
}

/**
 * Completes an install: checks the callback (no `error`, a state that matches the cookie and is
 * unused and unexpired), exchanges the code, looks the bot up, joins the channel and stores the
 * installation (replacing the workspace's and the application's previous one).
 * @throws {AppError} 400 on every refusal; nothing is stored then.
 */
export async function completeInstall(
  deps: SlackInstallerDeps,
  query: CallbackQuery,
  cookieState: string | undefined,
): Promise<SlackInstallation> {
  const { clientId, clientSecret, signingSecret } = deps.slack;
  if (!clientId || !clientSecret || !signingSecret) throw notConfigured();
  if (query.error) throw new AppError(400, `Slack install cancelled: ${query.error}`);
  if (!query.state || !query.code) throw new AppError(400, "Missing code or state");
  if (!cookieState || cookieState !== query.state) {
    throw new AppError(400, "This install was started in another browser");
  }
  const appId = await useOAuthState(deps.sql, sha256Bytes(query.state));
  if (appId === null) throw new AppError(400, "This install link is used or expired");

  const anonymous = createSlackWebClient(undefined, deps.slack.apiUrl);
  let access;
  try {
    access = await anonymous.oauth.v2.access({
      client_id: clientId,
      client_secret: clientSecret,
      code: query.code,
      redirect_uri: slackRedirectUri(deps.publicBaseUrl),
    });
  } catch (error) {
    throw new AppError(400, `Slack refused the install: ${slackErrorOf(error).code}`, {
      cause: error,
    });
  }
  const botToken = access.access_token;
  const teamId = access.team?.id;
  const channelId = access.incoming_webhook?.channel_id;
  if (!botToken || !teamId || !access.bot_user_id || !channelId) {
    throw new AppError(400, "Slack's answer lacks the bot token, workspace or channel");
  }
  const bot = createSlackWebClient(botToken, deps.slack.apiUrl);
  let botId: string | null = null;
  try {
    const identity = await bot.auth.test();
    botId = identity.bot_id ?? null;
    await bot.conversations.join({ channel: channelId }).catch((error) => {
      // A private channel cannot be joined, but the incoming-webhook consent already added the app.
      if (slackErrorOf(error).code !== "method_not_supported_for_channel_type") throw error;
    });
  } catch (error) {
    throw new AppError(400, `Slack refused the install: ${slackErrorOf(error).code}`, {
      cause: error,
    });
  }
  const installation: SlackInstallation = {
    teamId,
    appId,
    teamName: access.team?.name ?? null,
    enterpriseId: access.enterprise?.id ?? null,
    botTokenSealed: deps.secretBox.seal(botToken),
    botUserId: access.bot_user_id,
    botId,
    channelId,
    signingSecretSealed: deps.secretBox.seal(signingSecret),
  };
  await replaceInstallation(deps.sql, installation);
  return installation;
}
