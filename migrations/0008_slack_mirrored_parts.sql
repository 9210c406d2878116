-- A Parley message longer than one Slack post goes out as several: how many have been posted, so
-- that a retry goes on from the first part not posted instead of posting the others again.
ALTER TABLE slack_messages ADD COLUMN parts integer NOT NULL DEFAULT 1;
