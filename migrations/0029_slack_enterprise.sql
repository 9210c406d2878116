-- The Enterprise Grid organisation a Slack workspace belongs to (oauth.v2.access's `enterprise.id`),
-- by which an author from another of its workspaces is told from another organisation's member
-- in a Slack Connect channel. Null: none, or installed before this was recorded.
ALTER TABLE slack_installations ADD COLUMN enterprise_id text;
