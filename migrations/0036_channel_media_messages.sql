-- Which messages carry a channel's media (a Slack reply's file): a file whose every message was
-- deleted, or taken from the visitor (made an internal note after they saw it), is no longer
-- served through its signed link. Media recorded before this table have no rows, and are served.
CREATE TABLE channel_media_messages (
  channel text NOT NULL,
  app_id bigint NOT NULL,
  media_id text NOT NULL,
  message_id bigint NOT NULL,
  PRIMARY KEY (channel, app_id, media_id, message_id)
);
