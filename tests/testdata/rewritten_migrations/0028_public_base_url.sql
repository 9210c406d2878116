-- Where the running servers are reached, as the last one to start said (its PUBLIC_BASE_URL, or
-- http://localhost:<the port it listens on>): the CLI prints links to it when its own environment
-- names no PUBLIC_BASE_URL (one row).
CREATE TABLE public_base_url (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  url text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
