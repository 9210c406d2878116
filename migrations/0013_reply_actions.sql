-- The newest message with buttons from the bot or an agent, clickable once beside the Flow's
-- current step (action_message_id and flow_node), which such a message no longer displaces.
ALTER TABLE conversations ADD COLUMN reply_action_message_id bigint;
