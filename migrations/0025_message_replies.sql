-- The message a WhatsApp customer's message quotes (swipe-to-reply: Meta's `context.id`), when
-- Parley found it in the same conversation; NULL otherwise. Nullable without a default, so adding
-- it rewrites nothing. No foreign key: messages are only ever soft-deleted, and a key would make
-- every insert probe the table a second time.
ALTER TABLE messages ADD COLUMN reply_to_message_id bigint;
