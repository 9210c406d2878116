-- The claim an attempt was made under. Recording an attempt is tried again when the connection
-- drops before PostgreSQL's answer; the claim tells a second try of a record that did commit from
-- a new attempt, so the delivery log never shows one attempt twice.
ALTER TABLE webhook_attempts ADD COLUMN claimed_until timestamptz;
