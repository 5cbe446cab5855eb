-- A NEWEST page of SearchRecords reads the space's records newest first, not every match.
--
-- `records_search` (0019, GIN) answers which records hold a word, in no order: a page of
-- a word that many records hold read and sorted every match (a word in 10% of 100,000
-- records: 10,000 rows for a page of 21). This index holds the space's records in the
-- order of SearchRecords' NEWEST pages: storage_service.search.repository's probe reads
-- it backwards from the page's position, checks the word on each row, and stops at the
-- page (about 210 rows for that word), or after a bounded number of rows, when the GIN
-- plan serves the page (a rare word, or a word whose matches are all old).
--
-- `records` is the largest table: the index is built CONCURRENTLY, outside a transaction,
-- so appends go on while it is built (as 0027 and 0047); safe to run again after a crash
-- (a stopped build leaves an invalid index, dropped first). On Citus a CONCURRENTLY build
-- on a distributed table is built on each shard.
--
-- stello: outside a transaction
DROP INDEX CONCURRENTLY IF EXISTS records_newest;
CREATE INDEX CONCURRENTLY records_newest ON records (space_id, created_at, session_id, seq);
