-- One attempt row per claim, even when a record's second try runs while its first is still in
-- flight (the first try's connection dropped on our side only): the second waits for the first
-- and, once it commits, inserts nothing (ON CONFLICT DO NOTHING).
CREATE UNIQUE INDEX webhook_attempts_once_per_claim
  ON webhook_attempts (app_id, outbox_id, claimed_until) WHERE claimed_until IS NOT NULL;
