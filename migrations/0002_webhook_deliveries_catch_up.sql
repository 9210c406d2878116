-- Catch-up (see 0001_init_catch_up): 0002 first had a B-tree attempts-by-time index, an index of
-- deliveries by application, and no claim lease column (which 0017 needs).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claimed_until timestamptz;
DROP INDEX IF EXISTS outbox_by_app;
DO $$
BEGIN
  IF EXISTS (
    SELECT FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_am a ON a.oid = i.relam
    WHERE x.indrelid = 'webhook_attempts'::regclass AND i.relname = 'webhook_attempts_by_time'
      AND a.amname <> 'brin'
  ) THEN
    DROP INDEX webhook_attempts_by_time;
    CREATE INDEX webhook_attempts_by_time ON webhook_attempts USING brin (attempted_at);
  END IF;
END
$$;
