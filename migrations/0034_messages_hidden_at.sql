-- When a message the visitor saw was made an internal note (a Slack reply edited into `note:`):
-- a socket that reconnects after it is told the message is gone, as an open one was.
ALTER TABLE messages ADD COLUMN hidden_at timestamptz;
