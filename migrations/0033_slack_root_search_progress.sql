-- How far back a search for a lost root has read the channel (the oldest ts it has seen, newest
-- first): a search cut short (Slack lets some apps read one page a minute) goes on from there.
-- Cleared when the root is attempted again.
ALTER TABLE slack_root_attempts ADD COLUMN searched_to text;
