-- The ad or post a WhatsApp customer came from (Meta's `referral` on their first message sent from
-- a Click-to-WhatsApp ad): the fields Parley keeps, as Meta names them; NULL for every other
-- message. Nullable without a default, so adding it rewrites nothing.
ALTER TABLE messages ADD COLUMN referral jsonb;
