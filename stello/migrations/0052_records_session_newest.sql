-- A SearchRecords page within one session's view reads the view's records newest first, not
-- every match of the space.
--
-- A NEWEST page with session_id read the GIN's (`records_search`, 0019) matches of the
-- whole space and kept those of the view: a search inside one small session, in a big space,
-- of a word many records hold read every match of the space. A view is a few parts (a holder
-- session and a range of its seqs, storage_service.records.lineage.PARTS); a record's
-- created_at is its writer's (AppendRecords takes it), so a session's records in seq order
-- are not in the page's order (created_at, session_id, seq). This index holds each
-- session's records in that order: storage_service.search.repository reads each part
-- backwards from the page's position, checks the word on each row, and stops at the page,
-- or after a bounded number of rows, when the view's own records serve the page (a rare word):
-- its cost follows the page, or the view, never the rest of the space. `records_newest`
-- (0051) leads with the space's time, so a session's rows are scattered through it.
--
-- `records` is the largest table: the index is built CONCURRENTLY, outside a transaction,
-- so appends go on while it is built (as 0027, 0047 and 0051); safe to run again after a
-- crash (a stopped build leaves an invalid index, dropped first). On Citus a CONCURRENTLY
-- build on a distributed table is built on each shard.
--
-- stello: outside a transaction
DROP INDEX CONCURRENTLY IF EXISTS records_session_newest;
CREATE INDEX CONCURRENTLY records_session_newest
    ON records (space_id, session_id, created_at, seq);
