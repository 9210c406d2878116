-- Catch-up (see 0001_init_catch_up): 0005 first had no table of stored Slack requests.
CREATE TABLE IF NOT EXISTS slack_deliveries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('event', 'action')),
  body bytea NOT NULL,
  received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  processed_at timestamptz
);
CREATE INDEX IF NOT EXISTS slack_deliveries_unprocessed ON slack_deliveries (received_at)
  WHERE processed_at IS NULL;
