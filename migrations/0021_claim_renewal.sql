-- When a channel send (WhatsApp, the Slack mirror) was claimed: the claim's token. The lease
-- (`claimed_until`) is renewed while the send goes on, so it can be short and a crashed sender's
-- claims return soon; the record of what the send did is fenced by this token, which renewal
-- never changes.
ALTER TABLE outbox ADD COLUMN claimed_at timestamptz;
