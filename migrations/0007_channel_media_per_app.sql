-- A media id is recorded for every application that received it, not only the first: the media
-- proxies' links name their application, and serve media only to the application it was
-- received for, with that application's token.
ALTER TABLE channel_media DROP CONSTRAINT channel_media_pkey;
ALTER TABLE channel_media ADD PRIMARY KEY (channel, media_id, app_id);
