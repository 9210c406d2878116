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
