/**
 * The channels' housekeeping: what is kept only as long as it can matter. Finished channel sends
 * go after 14 days (like webhook attempts); applied raw requests after 3 days (their messages are
 * stored, duplicates are found by message id, and at load they are most of what grows), Slack
 * event ids and Slack deletions after 2 days (Slack retries for an hour), expired install tickets
 * and OAuth states, and WhatsApp receipts for sends never recorded, after a day, the WhatsApp
 * parts sent (which map status receipts to messages) and Slack root attempts whose thread was
 * never saved after 30 days.
 */
import type { Tx } from "./client.ts";

/**
 * Deletes what has outlived its use; resolves to the rows deleted. The bounds are
 * `statement_timestamp()`, stable, so that the indexes on the ages serve them.
 */
export async function sweepChannelRecords(sql: Tx): Promise<number> {
  const [row] = await sql<{ deleted: number }[]>`
    WITH sends AS (
      DELETE FROM outbox WHERE kind IN ('whatsapp', 'slack') AND state <> 'pending'
        AND created_at < statement_timestamp() - interval '14 days'
      RETURNING 1
    ), whatsapp AS (
      DELETE FROM whatsapp_deliveries WHERE processed_at < statement_timestamp() - interval '3 days'
      RETURNING 1
    ), slack AS (
      DELETE FROM slack_deliveries WHERE processed_at < statement_timestamp() - interval '3 days'
      RETURNING 1
    ), events AS (
      DELETE FROM slack_events WHERE received_at < statement_timestamp() - interval '2 days'
      RETURNING 1
    ), deletions AS (
      DELETE FROM slack_deleted_messages
      WHERE deleted_at < statement_timestamp() - interval '2 days'
      RETURNING 1
    ), tickets AS (
      DELETE FROM slack_install_tickets WHERE expires_at < statement_timestamp() - interval '1 day'
      RETURNING 1
    ), states AS (
      DELETE FROM slack_oauth_states WHERE expires_at < statement_timestamp() - interval '1 day'
      RETURNING 1
    ), receipts AS (
      DELETE FROM whatsapp_early_statuses
      WHERE received_at < statement_timestamp() - interval '1 day'
      RETURNING 1
    ), parts AS (
      DELETE FROM whatsapp_sent_parts WHERE sent_at < statement_timestamp() - interval '30 days'
      RETURNING 1
    ), roots AS (
      DELETE FROM slack_root_attempts WHERE last_at < statement_timestamp() - interval '30 days'
      RETURNING 1
    )
    SELECT ((SELECT count(*) FROM sends) + (SELECT count(*) FROM whatsapp)
      + (SELECT count(*) FROM slack) + (SELECT count(*) FROM events)
      + (SELECT count(*) FROM deletions)
      + (SELECT count(*) FROM tickets) + (SELECT count(*) FROM states)
      + (SELECT count(*) FROM parts) + (SELECT count(*) FROM roots)
      + (SELECT count(*) FROM receipts))::int AS deleted`;
  return row.deleted;
}
