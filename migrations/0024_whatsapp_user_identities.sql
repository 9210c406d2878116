-- WhatsApp usernames: a user who hides their phone number is named only by a business-scoped
-- user id (BSUID). A client keeps it as a second identity of its own kind, `whatsapp_user`, next
-- to the `whatsapp` identity (the phone number) when Meta shares that too.
-- NOT VALID: every row passed the narrower check it replaces, and validating would hold the
-- table's exclusive lock (widget visitors' lookups on other instances) while reading all of it.
ALTER TABLE client_identities DROP CONSTRAINT client_identities_channel_check;
ALTER TABLE client_identities ADD CONSTRAINT client_identities_channel_check
  CHECK (channel IN ('web', 'whatsapp', 'whatsapp_user', 'slack')) NOT VALID;
