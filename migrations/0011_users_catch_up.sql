-- Catch-up (see 0001_init_catch_up): 0011 first made emails unique by lower(email). Their key is
-- made as `emailKey` (src/domain/user.ts) makes it — NFKC, lowercased, NFKC again — but with
-- PostgreSQL's lower(), which folds what the database's locale folds (only ASCII under C), as
-- the first version's index did: keys stay as unique as the emails were.
ALTER TABLE users ADD COLUMN IF NOT EXISTS email_key text;
UPDATE users SET email_key = normalize(lower(normalize(email, NFKC)), NFKC)
WHERE email_key IS NULL;
ALTER TABLE users ALTER COLUMN email_key SET NOT NULL;
DO $$
BEGIN
  IF EXISTS (
    SELECT FROM pg_indexes
    WHERE tablename = 'users' AND indexname = 'users_by_email' AND indexdef NOT LIKE '%email_key%'
  ) THEN
    DROP INDEX users_by_email;
    CREATE UNIQUE INDEX users_by_email ON users (app_id, email_key);
  END IF;
END
$$;
