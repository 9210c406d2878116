-- Catch-up (see 0001_init_catch_up): 0012_webhook_body, since replaced by 0012_webhook_snapshot,
-- kept a delivery's body after its first attempt; nothing reads it now.
ALTER TABLE outbox DROP COLUMN IF EXISTS body;
