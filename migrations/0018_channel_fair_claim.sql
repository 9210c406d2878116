-- Channel sends are claimed fairly between applications (`claimedInConversationOrder`): the
-- applications with sends pending in turn, each one's oldest first. This index walks them and
-- orders each one's sends; the global oldest-first index it replaces is no longer read.
CREATE INDEX outbox_channel_sends_by_app ON outbox (kind, app_id, run_at)
  WHERE state = 'pending' AND kind <> 'webhook';
DROP INDEX outbox_due;
