-- Catch-up (see 0001_init_catch_up): 0011 first made emails unique by lower(email), which folds
-- only ASCII under the C locale. A user's key is made here as `emailKey` (src/domain/user.ts)
-- makes it — NFKC, lowercased, NFKC again — with PostgreSQL's lower(), which folds what the
-- database's locale folds. Two emails the first version told apart may share that key (a letter
-- composed and decomposed, the Kelvin sign and K): the first user keeps it, and each later one a
-- key no email has (a space and its id after it), so that the unique index can be built.
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'users' AND column_name = 'email_key'
  ) THEN
    ALTER TABLE users ADD COLUMN email_key text;
    UPDATE users u SET email_key = CASE WHEN k.n = 1 THEN k.key ELSE k.key || ' ' || u.id END
    FROM (
      SELECT app_id, id, key, row_number() OVER (PARTITION BY app_id, key ORDER BY id) AS n
      FROM (
        SELECT app_id, id, normalize(lower(normalize(email, NFKC)), NFKC) AS key FROM users
      ) keyed
    ) k
    WHERE u.app_id = k.app_id AND u.id = k.id;
    ALTER TABLE users ALTER COLUMN email_key SET NOT NULL;
    DROP INDEX IF EXISTS users_by_email;
    CREATE UNIQUE INDEX users_by_email ON users (app_id, email_key);
  END IF;
END
$$;
