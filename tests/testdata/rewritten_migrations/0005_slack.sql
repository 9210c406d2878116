-- The Slack channel (CONTRACT §6.2): an application's conversations mirrored as threads in one
-- channel of the workspace it is installed in, and agents answering from those threads.

-- One installation per workspace, and one workspace per application: re-installing replaces.
CREATE TABLE slack_installations (
  team_id text PRIMARY KEY,
  app_id bigint NOT NULL UNIQUE REFERENCES applications (id),
  team_name text,
  bot_token_sealed text NOT NULL,
  bot_user_id text NOT NULL,
  bot_id text,
  -- The channel picked on Slack's consent screen (incoming_webhook.channel_id).
  channel_id text NOT NULL,
  -- The signing secret in force when the workspace installed the app.
  signing_secret_sealed text NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Single-use links that start an install (slack:install-url, the dashboard), and the OAuth
-- `state` values handed to Slack; both expire after 10 minutes and are stored as SHA-256.
CREATE TABLE slack_install_tickets (
  token_hash bytea PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES applications (id),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE TABLE slack_oauth_states (
  state_hash bytea PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES applications (id),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);

-- A conversation's thread: (team, channel, thread ts) ↔ conversation.
CREATE TABLE slack_threads (
  app_id bigint NOT NULL,
  conversation_id bigint NOT NULL,
  team_id text NOT NULL,
  channel_id text NOT NULL,
  thread_ts text NOT NULL,
  PRIMARY KEY (app_id, conversation_id),
  UNIQUE (team_id, channel_id, thread_ts)
);

-- Each mirrored message's Slack ts (to edit and delete it), and each agent reply's (so that
-- Slack's redeliveries, and its echo of our own posts, are recognized).
CREATE TABLE slack_messages (
  app_id bigint NOT NULL,
  message_id bigint NOT NULL,
  team_id text NOT NULL,
  channel_id text NOT NULL,
  ts text NOT NULL,
  PRIMARY KEY (app_id, message_id),
  UNIQUE (team_id, channel_id, ts)
);

-- Events already processed, by Slack's event_id (kept 2 days: Slack retries for an hour).
CREATE TABLE slack_events (
  team_id text NOT NULL,
  event_id text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (team_id, event_id)
);

-- An outbox row of kind 'slack' mirrors one message (posted, updated or deleted).
