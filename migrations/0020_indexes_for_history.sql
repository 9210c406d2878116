-- Indexes for queries that grew with the history kept (measured on 2 million messages, 5 million
-- outbox rows, 11 million attempts):
-- A conversation's client's identity, for each WhatsApp send claimed and each click resolved:
-- the primary key (app_id, channel, external_id) made both read every WhatsApp identity of the
-- application (25-48 ms a claim of 16 sends).
CREATE INDEX client_identities_by_client ON client_identities (app_id, client_id);

-- The sweeps of finished outbox rows and applied raw requests, 14 days old: they read the whole
-- kept history every hour (3.5 s; 7-22 s for the webhook deliveries). Entries are added when a
-- row is finished or applied, an update that was not HOT anyway.
CREATE INDEX outbox_finished_by_age ON outbox (created_at) WHERE state <> 'pending';
CREATE INDEX whatsapp_deliveries_applied ON whatsapp_deliveries (processed_at)
  WHERE processed_at IS NOT NULL;
CREATE INDEX slack_deliveries_applied ON slack_deliveries (processed_at)
  WHERE processed_at IS NOT NULL;

-- The listing by status: with activity alone indexed, a page of open conversations read past
-- every closed one (23,000 rows for 42). The listing of both statuses merges the two ranges.
-- Closing a conversation is no longer a HOT update; a message's activity update never was.
CREATE INDEX conversations_by_status_activity
  ON conversations (app_id, status, last_message_at DESC, id DESC);
DROP INDEX conversations_by_activity;
