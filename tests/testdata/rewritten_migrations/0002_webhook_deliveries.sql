-- Webhook deliveries: the outbox row is the delivery (its state, attempt count and next run);
-- each attempt is kept 14 days for the delivery log.

CREATE TABLE webhook_attempts (
  app_id bigint NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY,
  outbox_id bigint NOT NULL,
  attempted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- The receiver's HTTP status; null when there was no answer (refused, timeout, TLS, SSRF).
  status_code integer,
  latency_ms integer NOT NULL,
  error text,
  -- At most the first 1 KiB of the receiver's answer.
  response_excerpt text,
  PRIMARY KEY (app_id, id),
  FOREIGN KEY (app_id, outbox_id) REFERENCES outbox (app_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (app_id, outbox_id, id);
CREATE INDEX webhook_attempts_by_time ON webhook_attempts (attempted_at);

-- The delivery log lists an application's deliveries newest first.
CREATE INDEX outbox_by_app ON outbox (app_id, kind, id DESC);
