-- Webhook deliveries are claimed fairly between applications (`claimDueDeliveries`): first
-- attempts application by application in turn, each one's oldest first, walking the applications
-- that have any; retries and expired leases oldest first. The first index holds exactly the
-- deliveries waiting for their first attempt, so the walk visits only applications with work.
CREATE INDEX outbox_webhooks_new ON outbox (app_id, run_at)
  WHERE kind = 'webhook' AND state = 'pending' AND attempts = 0 AND claimed_until IS NULL;
CREATE INDEX outbox_webhooks_again ON outbox (run_at)
  WHERE kind = 'webhook' AND state = 'pending' AND (attempts > 0 OR claimed_until IS NOT NULL);

-- The channel sends' indexes no longer hold webhook deliveries: each event queued costs two
-- index entries fewer. (Their queries name the kind as a literal, which proves the predicate.)
DROP INDEX outbox_due;
CREATE INDEX outbox_due ON outbox (kind, run_at) WHERE state = 'pending' AND kind <> 'webhook';
DROP INDEX outbox_pending_by_conversation;
CREATE INDEX outbox_pending_by_conversation
  ON outbox (kind, app_id, ((payload ->> 'conversation_id')::bigint), id)
  WHERE state = 'pending' AND kind <> 'webhook';
