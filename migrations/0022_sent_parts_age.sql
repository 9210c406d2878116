-- WhatsApp's sent parts map status receipts (by wamid) to messages: a month after it was sent a
-- part's receipt no longer matters, and the channel sweep deletes it by its age.
CREATE INDEX whatsapp_sent_parts_by_age ON whatsapp_sent_parts (sent_at);
