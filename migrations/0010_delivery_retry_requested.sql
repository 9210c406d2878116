-- A manual retry asked while an attempt is in flight: the attempt records its outcome, and when
-- that is not a success the delivery is due again at once (even after its last scheduled attempt).
ALTER TABLE outbox ADD COLUMN retry_requested boolean NOT NULL DEFAULT false;
