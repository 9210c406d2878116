-- Where the running servers are reached, for the links the CLI prints when its own environment
-- names no PUBLIC_BASE_URL (one row): a server's PUBLIC_BASE_URL (explicit), or else
-- http://localhost:<the port it listens on>, which never replaces an explicit one.
CREATE TABLE public_base_url (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  url text NOT NULL,
  explicit boolean NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
