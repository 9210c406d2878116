/** Queries of the `webhooks` table: one configuration per application, its secret sealed. */
import type { Tx } from "./client.ts";
import { UNSUBSCRIBED_CANCELLATION, type WebhookConfig } from "../domain/webhook_config.ts";

/** A stored configuration and its sealed secret. */
export interface StoredWebhook extends WebhookConfig {
  secretSealed: string;
}

/** The configuration of an application, or null when it never configured one. */
export async function findWebhook(sql: Tx, appId: number): Promise<WebhookConfig | null> {
  const [row] = await sql<WebhookConfig[]>`
    SELECT url, events, enabled FROM webhooks WHERE app_id = ${appId}`;
  return row ?? null;
}

/**
 * Replaces an application's configuration. `newSecretSealed` is stored only by the first one:
 * the secret is created once and never rotated by an update. Pending deliveries the new
 * configuration no longer sends (the webhook disabled, or their event unsubscribed) are cancelled
 * at once, but for one in flight, which is cancelled at its next attempt. Returns what is stored.
 */
export async function replaceWebhook(
  sql: Tx,
  appId: number,
  config: WebhookConfig,
  newSecretSealed: string,
): Promise<StoredWebhook> {
  const [row] = await sql<(WebhookConfig & { secret_encrypted: string })[]>`
    WITH cancelled AS (
      UPDATE outbox o
      SET state = 'failed', last_error = ${UNSUBSCRIBED_CANCELLATION}
      WHERE o.app_id = ${appId} AND o.kind = 'webhook' AND o.state = 'pending'
        AND (o.claimed_until IS NULL OR o.claimed_until < clock_timestamp())
        AND NOT (${config.enabled} AND ${config.url} <> ''
          AND o.topic = ANY (${config.events}::text[]))
      RETURNING o.app_id, o.id
    ), noted AS (
      -- The delivery log shows why each stopped, as it does for one cancelled at its attempt.
      INSERT INTO webhook_attempts (app_id, outbox_id, latency_ms, error)
      SELECT app_id, id, 0, ${UNSUBSCRIBED_CANCELLATION} FROM cancelled
    )
    INSERT INTO webhooks (app_id, url, events, enabled, secret_encrypted)
    VALUES (${appId}, ${config.url}, ${config.events}::text[], ${config.enabled}, ${newSecretSealed})
    ON CONFLICT (app_id) DO UPDATE SET url = EXCLUDED.url, events = EXCLUDED.events,
      enabled = EXCLUDED.enabled, updated_at = clock_timestamp()
    RETURNING url, events, enabled, secret_encrypted`;
  return {
    url: row.url,
    events: row.events,
    enabled: row.enabled,
    secretSealed: row.secret_encrypted,
  };
}
