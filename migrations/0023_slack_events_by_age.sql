-- Slack event ids are kept two days for deduplication and then swept by their age: without an
-- index the hourly sweep read every event id of those two days.
CREATE INDEX slack_events_by_age ON slack_events USING brin (received_at);
