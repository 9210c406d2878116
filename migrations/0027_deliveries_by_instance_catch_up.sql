-- Catch-up (see 0001_init_catch_up): 0027 first stored no order scopes with channel requests (a
-- request without them waits for everything of its application or workspace, as before).
ALTER TABLE whatsapp_deliveries ADD COLUMN IF NOT EXISTS scopes text[];
ALTER TABLE slack_deliveries ADD COLUMN IF NOT EXISTS scopes text[];
