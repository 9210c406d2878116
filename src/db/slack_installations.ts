/**
 * Queries of the Slack install: single-use install tickets and OAuth states (stored as SHA-256,
 * valid 10 minutes, consumed atomically), and the installations themselves — one per workspace
 * and one per application, their bot token and signing secret sealed.
 */
import type { Sql, Tx } from "./client.ts";

/** How long a ticket or state stays usable. */
export const SLACK_INSTALL_TTL_SECONDS = 600;

/** Stores a new install ticket for `appId`. */
export async function insertInstallTicket(
  sql: Tx,
  tokenHash: Uint8Array,
  appId: number,
): Promise<void> {
  await sql`
    INSERT INTO slack_install_tickets (token_hash, app_id, expires_at)
    VALUES (${tokenHash}, ${appId},
      clock_timestamp() + make_interval(secs => ${SLACK_INSTALL_TTL_SECONDS}))`;
}

/** Consumes a ticket: its application, or null when unknown, used or expired. */
export async function useInstallTicket(sql: Tx, tokenHash: Uint8Array): Promise<number | null> {
  const [row] = await sql<{ app_id: number }[]>`
    UPDATE slack_install_tickets SET used_at = clock_timestamp()
    WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > clock_timestamp()
    RETURNING app_id`;
  return row?.app_id ?? null;
}

/** Stores the OAuth `state` handed to Slack for `appId`. */
export async function insertOAuthState(
  sql: Tx,
  stateHash: Uint8Array,
  appId: number,
): Promise<void> {
  await sql`
    INSERT INTO slack_oauth_states (state_hash, app_id, expires_at)
    VALUES (${stateHash}, ${appId},
      clock_timestamp() + make_interval(secs => ${SLACK_INSTALL_TTL_SECONDS}))`;
}

/** Consumes a state: its application, or null when unknown, used or expired. */
export async function useOAuthState(sql: Tx, stateHash: Uint8Array): Promise<number | null> {
  const [row] = await sql<{ app_id: number }[]>`
    UPDATE slack_oauth_states SET used_at = clock_timestamp()
    WHERE state_hash = ${stateHash} AND used_at IS NULL AND expires_at > clock_timestamp()
    RETURNING app_id`;
  return row?.app_id ?? null;
}

/** An installation, its secrets sealed. */
export interface SlackInstallation {
  teamId: string;
  appId: number;
  teamName: string | null;
  /** The Enterprise Grid organisation of the workspace; null when none (or not recorded). */
  enterpriseId: string | null;
  botTokenSealed: string;
  botUserId: string;
  botId: string | null;
  channelId: string;
  signingSecretSealed: string;
}

interface InstallationRow {
  team_id: string;
  app_id: number;
  team_name: string | null;
  enterprise_id: string | null;
  bot_token_sealed: string;
  bot_user_id: string;
  bot_id: string | null;
  channel_id: string;
  signing_secret_sealed: string;
}

function toInstallation(row: InstallationRow): SlackInstallation {
  return {
    teamId: row.team_id,
    appId: row.app_id,
    teamName: row.team_name,
    enterpriseId: row.enterprise_id,
    botTokenSealed: row.bot_token_sealed,
    botUserId: row.bot_user_id,
    botId: row.bot_id,
    channelId: row.channel_id,
    signingSecretSealed: row.signing_secret_sealed,
  };
}

/**
 * Stores an installation: it replaces the workspace's previous one and the application's
 * previous one (an application mirrors into one workspace, a workspace serves one application).
 */
export async function replaceInstallation(
  sql: Sql,
  installation: SlackInstallation,
): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`
      DELETE FROM slack_installations
      WHERE team_id = ${installation.teamId} OR app_id = ${installation.appId}`;
    await tx`
      INSERT INTO slack_installations (team_id, app_id, team_name, enterprise_id,
        bot_token_sealed, bot_user_id, bot_id, channel_id, signing_secret_sealed)
      VALUES (${installation.teamId}, ${installation.appId}, ${installation.teamName},
        ${installation.enterpriseId}, ${installation.botTokenSealed}, ${installation.botUserId},
        ${installation.botId}, ${installation.channelId}, ${installation.signingSecretSealed})`;
  });
}

/** The installation of a workspace, or null. */
export async function findInstallationByTeam(
  sql: Tx,
  teamId: string,
): Promise<SlackInstallation | null> {
  const [row] = await sql<InstallationRow[]>`
    SELECT * FROM slack_installations WHERE team_id = ${teamId}`;
  return row ? toInstallation(row) : null;
}

/** The installation of an application, or null. */
export async function findInstallationByApp(
  sql: Tx,
  appId: number,
): Promise<SlackInstallation | null> {
  const [row] = await sql<InstallationRow[]>`
    SELECT * FROM slack_installations WHERE app_id = ${appId}`;
  return row ? toInstallation(row) : null;
}
