-- Catch-up (see 0001_init_catch_up): 0028 first did not record whether the URL was a server's
-- PUBLIC_BASE_URL; the URL kept is taken for a guess, which the next server's replaces.
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'public_base_url'
      AND column_name = 'explicit'
  ) THEN
    ALTER TABLE public_base_url ADD COLUMN explicit boolean NOT NULL DEFAULT false;
    ALTER TABLE public_base_url ALTER COLUMN explicit DROP DEFAULT;
  END IF;
END
$$;
