-- Webhook claims walk one index of each application's pending deliveries, first attempts,
-- retries and expired leases alike, so that an application's retries count against its share
-- like its first attempts (0017's separate retry index let them take every slot, and starved in
-- claims of one slot). The lease stays out of the index and its predicate, so that a claim's
-- update can be HOT.
DROP INDEX outbox_webhooks_new;
DROP INDEX outbox_webhooks_again;
CREATE INDEX outbox_webhooks_pending ON outbox (app_id, run_at)
  WHERE kind = 'webhook' AND state = 'pending';
