-- Catch-up (see 0001_init_catch_up): 0012_webhook_body, since replaced by 0012_webhook_snapshot,
-- kept a delivery's body after its first attempt; nothing reads it now.
DO $$
BEGIN
  IF EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'outbox' AND column_name = 'body'
  ) THEN
    ALTER TABLE outbox DROP COLUMN body;
  END IF;
END
$$;
