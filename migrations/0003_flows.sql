-- Flows (CONTRACT §4.1): one per application, stored validated. A conversation remembers the
-- message whose buttons wait for a click (any sender's) and, when a Flow sent it, the Flow's
-- node; a click is accepted only on that message, once.

CREATE TABLE flows (
  app_id bigint PRIMARY KEY REFERENCES applications (id),
  -- json, not jsonb: the Flow reads back with the keys in the order its author wrote them.
  definition json NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

ALTER TABLE conversations
  ADD COLUMN action_message_id bigint,
  ADD COLUMN flow_node text;
