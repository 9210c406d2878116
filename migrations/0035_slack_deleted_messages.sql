-- Messages deleted in Slack, by where they were: a reply whose first delivery failed comes again
-- when Slack retries it, possibly after its deletion was applied, and must then stay deleted.
-- Kept two days, as Slack's event ids are (Slack retries for an hour).
CREATE TABLE slack_deleted_messages (
  team_id text NOT NULL,
  channel_id text NOT NULL,
  ts text NOT NULL,
  deleted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (team_id, channel_id, ts)
);
CREATE INDEX slack_deleted_messages_deleted_at ON slack_deleted_messages (deleted_at);
