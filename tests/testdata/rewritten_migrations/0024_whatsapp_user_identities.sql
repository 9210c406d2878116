-- WhatsApp usernames: a user who hides their phone number is named only by a business-scoped
-- user id (BSUID). A client keeps it as a second identity of its own kind, `whatsapp_user`, next
-- to the `whatsapp` identity (the phone number) when Meta shares that too.
ALTER TABLE client_identities DROP CONSTRAINT client_identities_channel_check;
ALTER TABLE client_identities ADD CONSTRAINT client_identities_channel_check
  CHECK (channel IN ('web', 'whatsapp', 'whatsapp_user', 'slack'));
