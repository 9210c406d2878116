-- Until when Slack asked (429, Retry-After) that the workspace's calls wait: every mirror sender,
-- on every instance, holds the workspace's posts back until then instead of meeting its own 429.
ALTER TABLE slack_installations ADD COLUMN rate_limited_until timestamptz;
