-- Catch-up (see 0001_init_catch_up): 0006 first had no index of pending sends by conversation
-- (0017 replaces it, by name: a database past 0017 keeps its own) and sent parts had no
-- conversation, by which status receipts and quoted replies find their message: the parts sent
-- then get their message's.
DO $$
BEGIN
  IF to_regclass('outbox_pending_by_conversation') IS NULL THEN
    CREATE INDEX outbox_pending_by_conversation
      ON outbox (kind, app_id, ((payload ->> 'conversation_id')::bigint), id)
      WHERE state = 'pending';
  END IF;
  IF NOT EXISTS (
    SELECT FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'whatsapp_sent_parts'
      AND column_name = 'conversation_id'
  ) THEN
    ALTER TABLE whatsapp_sent_parts ADD COLUMN conversation_id bigint;
    UPDATE whatsapp_sent_parts p SET conversation_id = m.conversation_id
    FROM messages m
    WHERE m.app_id = p.app_id AND m.id = p.message_id;
  END IF;
END
$$;
