-- Which instance stored a channel request (a number drawn at each start), and, for Slack, its
-- workspace: a request waits for the requests of its application or workspace that another
-- instance stored before it to be applied (see src/channels/earlier_deliveries.ts). The index
-- finds another instance's waiting requests without reading this instance's own. Nullable
-- without a default, so adding the columns rewrites nothing; rows stored before them have no
-- instance and are left to recovery.
ALTER TABLE whatsapp_deliveries ADD COLUMN stored_by bigint;
CREATE INDEX whatsapp_deliveries_waiting ON whatsapp_deliveries (app_id, stored_by, id)
  WHERE processed_at IS NULL;
ALTER TABLE slack_deliveries ADD COLUMN team_id text, ADD COLUMN stored_by bigint;
CREATE INDEX slack_deliveries_waiting ON slack_deliveries (team_id, stored_by, id)
  WHERE processed_at IS NULL;
