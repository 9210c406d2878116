-- What a webhook delivery announces (its conversation and message as JSON), taken when the
-- delivery is first claimed and kept: every attempt, the first included, and a manual retry
-- send the same bytes under the same event id, not a body rebuilt from the state then. `json`,
-- not `jsonb`, so that the keys keep their order.
ALTER TABLE outbox ADD COLUMN snapshot json;
