-- A stored channel request that keeps failing to apply must not block the ones behind it:
-- each failed application is counted, and recovery gives up on a request after a few.
ALTER TABLE whatsapp_deliveries
  ADD COLUMN attempts integer NOT NULL DEFAULT 0,
  ADD COLUMN last_error text;
ALTER TABLE slack_deliveries
  ADD COLUMN attempts integer NOT NULL DEFAULT 0,
  ADD COLUMN last_error text;

-- Which application a channel's media id (a WhatsApp media id, a Slack file id) belongs to: the
-- media proxies' signed links name the media only (CONTRACT §6.1).
CREATE TABLE channel_media (
  channel text NOT NULL CHECK (channel IN ('whatsapp', 'slack')),
  media_id text NOT NULL,
  app_id bigint NOT NULL REFERENCES applications (id),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (channel, media_id)
);

-- A channel claim looks for an earlier pending send of the same conversation for every
-- candidate: an index makes that a probe, however long an outage let the outbox grow.
CREATE INDEX outbox_pending_by_conversation
  ON outbox (kind, app_id, ((payload ->> 'conversation_id')::bigint), id)
  WHERE state = 'pending';

-- Status receipts and replies find an outbound message through its parts: with the
-- conversation, the lookup of the message is exact on its index.
ALTER TABLE whatsapp_sent_parts ADD COLUMN conversation_id bigint;
