-- Catch-up (see 0001_init_catch_up): 0027 first stored no order scopes with channel requests (a
-- request without them waits for everything of its application or workspace, as before).
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'whatsapp_deliveries'
      AND column_name = 'scopes'
  ) THEN
    ALTER TABLE whatsapp_deliveries ADD COLUMN scopes text[];
  END IF;
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'slack_deliveries'
      AND column_name = 'scopes'
  ) THEN
    ALTER TABLE slack_deliveries ADD COLUMN scopes text[];
  END IF;
END
$$;
