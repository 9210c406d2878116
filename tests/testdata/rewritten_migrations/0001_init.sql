-- Parley's first schema. Every tenant table carries app_id, its keys start with app_id and
-- its foreign keys include app_id, so that the schema can be distributed by application later
-- (see docs/architecture.md, "Scale-out"). Ids come from global identity sequences.

CREATE TABLE applications (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  public_id text NOT NULL UNIQUE,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Looked up by hash without knowing the application: a global (reference) table.
CREATE TABLE api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES applications (id),
  name text,
  key_hash bytea NOT NULL UNIQUE,
  prefix text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_by_app ON api_keys (app_id, id);

-- Visitors and customers of an application.
CREATE TABLE clients (
  app_id bigint NOT NULL REFERENCES applications (id),
  id bigint GENERATED ALWAYS AS IDENTITY,
  name text,
  email text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, id)
);

-- How a client is known on each channel: web = SHA-256 hex of the visitor token,
-- whatsapp = the customer's wa_id.
CREATE TABLE client_identities (
  app_id bigint NOT NULL,
  channel text NOT NULL CHECK (channel IN ('web', 'whatsapp', 'slack')),
  external_id text NOT NULL,
  client_id bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, channel, external_id),
  FOREIGN KEY (app_id, client_id) REFERENCES clients (app_id, id)
);

CREATE TABLE conversations (
  app_id bigint NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY,
  client_id bigint NOT NULL,
  channel text NOT NULL CHECK (channel IN ('web', 'whatsapp')),
  status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_message_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_inbound_at timestamptz,
  closed_at timestamptz,
  PRIMARY KEY (app_id, id),
  FOREIGN KEY (app_id, client_id) REFERENCES clients (app_id, id)
);
CREATE INDEX conversations_by_activity ON conversations (app_id, last_message_at DESC, id DESC);
CREATE INDEX conversations_open_by_client ON conversations (app_id, client_id, channel)
  WHERE status = 'open';
CREATE INDEX conversations_by_client ON conversations (app_id, client_id, id);

CREATE TABLE messages (
  app_id bigint NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY,
  conversation_id bigint NOT NULL,
  sender_type text NOT NULL
    CHECK (sender_type IN ('visitor', 'agent', 'bot', 'ai', 'flow', 'system')),
  sender_name text,
  message_type text NOT NULL DEFAULT 'text',
  content text NOT NULL,
  payload jsonb,
  internal boolean NOT NULL DEFAULT false,
  status text CHECK (status IN ('pending', 'sent', 'delivered', 'read', 'failed')),
  external_id text,
  platform_timestamp timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz,
  deleted_at timestamptz,
  PRIMARY KEY (app_id, id),
  FOREIGN KEY (app_id, conversation_id) REFERENCES conversations (app_id, id)
);
CREATE INDEX messages_by_conversation ON messages (app_id, conversation_id, id);
CREATE UNIQUE INDEX messages_by_external_id ON messages (app_id, external_id)
  WHERE external_id IS NOT NULL;

-- One webhook subscription per application (configured through the Open API).
CREATE TABLE webhooks (
  app_id bigint PRIMARY KEY REFERENCES applications (id),
  url text NOT NULL DEFAULT '',
  events text[] NOT NULL DEFAULT '{}',
  enabled boolean NOT NULL DEFAULT false,
  secret_encrypted text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Work created in the same transaction as the change it follows from: webhook events and
-- channel sends. Claimed with FOR UPDATE SKIP LOCKED; retry state lives in the row.
CREATE TABLE outbox (
  app_id bigint NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY,
  kind text NOT NULL CHECK (kind IN ('webhook', 'whatsapp', 'slack')),
  topic text NOT NULL,
  payload jsonb NOT NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  run_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, id)
);
CREATE INDEX outbox_due ON outbox (kind, run_at) WHERE state = 'pending';

-- Fixed-window request counters shared by every instance. Unlogged: a crash of the database
-- only resets the current windows.
CREATE UNLOGGED TABLE rate_limits (
  bucket text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (bucket, window_start)
);
