-- Catch-up (see 0001_init_catch_up): 0002 first had a B-tree attempts-by-time index, an index of
-- deliveries by application, and no claim lease column (which 0017 needs). Each change is made
-- only where it is missing: on a database that has it, nothing takes the table's lock.
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'outbox'
      AND column_name = 'claimed_until'
  ) THEN
    ALTER TABLE outbox ADD COLUMN claimed_until timestamptz;
  END IF;
  IF to_regclass('outbox_by_app') IS NOT NULL THEN
    DROP INDEX outbox_by_app;
  END IF;
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
