-- Catch-up (see 0001_init_catch_up): 0028 first did not record whether the URL was a server's
-- PUBLIC_BASE_URL; the URL kept is taken for a guess, which the next server's replaces.
ALTER TABLE public_base_url ADD COLUMN IF NOT EXISTS explicit boolean NOT NULL DEFAULT false;
ALTER TABLE public_base_url ALTER COLUMN explicit DROP DEFAULT;
