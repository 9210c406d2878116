-- A value sealed with the secret box's key when the first instance starts: every later start
-- opens it, so that an instance given another PARLEY_ENCRYPTION_KEY refuses to start instead of
-- failing on every sealed secret (and sealing new ones the others cannot read).
CREATE TABLE key_check (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  sealed text NOT NULL
);
