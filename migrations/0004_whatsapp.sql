-- The WhatsApp Cloud channel (CONTRACT §6.1): one business phone number per application, its
-- secrets sealed (AES-256-GCM, CONTRACT §7).
CREATE TABLE whatsapp_channels (
  app_id bigint PRIMARY KEY REFERENCES applications (id),
  phone_number_id text NOT NULL UNIQUE,
  access_token_sealed text NOT NULL,
  app_secret_sealed text NOT NULL,
  verify_token_sealed text NOT NULL,
  -- Set when Meta refused the access token (error 190): the channel needs attention.
  attention_reason text,
  attention_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Webhook deliveries from Meta, stored raw (the exact bytes that were signed) before the 200,
-- processed after it; an unprocessed one is picked up again after a crash.
CREATE TABLE whatsapp_deliveries (
  app_id bigint NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY,
  body bytea NOT NULL,
  received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  processed_at timestamptz,
  PRIMARY KEY (app_id, id)
);
CREATE INDEX whatsapp_deliveries_unprocessed ON whatsapp_deliveries (received_at)
  WHERE processed_at IS NULL;

-- Every WhatsApp message id (wamid) of an outbound message: one Parley message may go out as
-- several WhatsApp messages (long text, a carousel). Status receipts and replies name any of them.
CREATE TABLE whatsapp_sent_parts (
  app_id bigint NOT NULL,
  wamid text NOT NULL,
  message_id bigint NOT NULL,
  part integer NOT NULL,
  sent_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, wamid)
);
CREATE UNIQUE INDEX whatsapp_sent_parts_by_message ON whatsapp_sent_parts (app_id, message_id, part);

-- Why a channel could not deliver a message (the platform's error code and title).
ALTER TABLE messages
  ADD COLUMN failure_code integer,
  ADD COLUMN failure_title text;
