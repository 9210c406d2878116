-- Idempotency-Key of POST /openapi/v1/messages: for a day, a key names the one message its
-- request stored, and a retry that brings the key back is answered with that message instead of
-- storing another. A claim and its message commit together; a request that stored nothing leaves
-- no key behind.
CREATE TABLE idempotency_keys (
  app_id bigint NOT NULL,
  key text NOT NULL,
  -- SHA-256 hex of the request (conversation, type, content): the key's reuse for another
  -- request is refused.
  fingerprint text NOT NULL,
  message_id bigint,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
