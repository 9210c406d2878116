-- A conversation's root post in Slack that was attempted and whose ts is not known yet (its
-- answer cut, a timeout, the process gone before the thread was saved): when it was first and
-- last attempted, so that the next attempt looks for it in the channel (by the metadata it
-- carries) rather than open a second thread. Removed once the thread is saved.
CREATE TABLE slack_root_attempts (
  app_id bigint NOT NULL,
  conversation_id bigint NOT NULL,
  team_id text NOT NULL,
  channel_id text NOT NULL,
  first_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, conversation_id, team_id, channel_id)
);
