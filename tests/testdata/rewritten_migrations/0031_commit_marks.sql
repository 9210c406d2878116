-- The transaction each database session last committed through the actors' write path, written
-- inside it, so that a COMMIT whose answer was lost is confirmed by what it wrote. The status of
-- its transaction id alone is not to be trusted across a crash: PostgreSQL then hands out again
-- the ids whose WAL never reached the disk, and a new transaction may commit under the lost
-- one's id. One row per backend process id, updated in place.
CREATE TABLE commit_marks (
  pid integer PRIMARY KEY,
  xid xid8 NOT NULL
) WITH (fillfactor = 50);
