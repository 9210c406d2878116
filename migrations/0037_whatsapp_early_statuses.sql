-- WhatsApp receipts that came before Parley recorded the send they are about (Meta's webhook
-- can beat the answer of the send itself): kept, and applied once the send's wamid is recorded.
-- A receipt for a message Parley never sent stays until the sweep (a day).
CREATE TABLE whatsapp_early_statuses (
  app_id bigint NOT NULL,
  wamid text NOT NULL,
  status text NOT NULL,
  error_code int,
  error_title text,
  received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, wamid, status)
);
CREATE INDEX whatsapp_early_statuses_received_at ON whatsapp_early_statuses (received_at);
