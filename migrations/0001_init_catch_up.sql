-- Catch-ups: a migration file was edited after it had been committed, and a database migrated by a
-- commit between the two kept the first version (migrations are recorded by name only). Each
-- `*_catch_up` migration, applied just after the one it follows (or, on a database already past
-- it, at the next start), brings such a database to what the edited file makes, and does nothing
-- to one the edited file made (checking the catalog first, so that it takes no table's lock).
-- Migrations are no longer edited once committed (`migrations/README.md`).
--
-- 0001_init first also had an index of open conversations by client, which the activity index
-- replaced (every index costs each message a write).
DO $$
BEGIN
  IF to_regclass('conversations_open_by_client') IS NOT NULL THEN
    DROP INDEX conversations_open_by_client;
  END IF;
END
$$;
