-- Catch-up (see 0001_init_catch_up): 0031 first kept no time of a mark's last write, which the
-- sweep of marks reads.
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'commit_marks' AND column_name = 'at'
  ) THEN
    ALTER TABLE commit_marks ADD COLUMN at timestamptz NOT NULL DEFAULT clock_timestamp();
  END IF;
END
$$;
