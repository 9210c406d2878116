-- The body of a webhook delivery as its first attempt sent it: every later attempt (and a manual
-- retry) sends the same bytes under the same event id, not a body rebuilt from the state then.
ALTER TABLE outbox ADD COLUMN body text;
