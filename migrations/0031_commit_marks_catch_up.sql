-- Catch-up (see 0001_init_catch_up): 0031 first kept no time of a mark's last write, which the
-- sweep of marks reads.
ALTER TABLE commit_marks ADD COLUMN IF NOT EXISTS at timestamptz NOT NULL DEFAULT clock_timestamp();
