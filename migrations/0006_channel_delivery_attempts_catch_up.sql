-- Catch-up (see 0001_init_catch_up): 0006 first had no index of pending sends by conversation
-- (0017 replaces it, by name: a database past 0017 keeps its own) and sent parts had no
-- conversation.
CREATE INDEX IF NOT EXISTS outbox_pending_by_conversation
  ON outbox (kind, app_id, ((payload ->> 'conversation_id')::bigint), id)
  WHERE state = 'pending';
ALTER TABLE whatsapp_sent_parts ADD COLUMN IF NOT EXISTS conversation_id bigint;
