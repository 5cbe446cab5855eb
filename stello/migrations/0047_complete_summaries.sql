-- The newest complete summary of a session is one probe of an index of its own.
--
-- A catch-up summary (`lossy`) stands until a background fold replaces it by a complete
-- one at the same seq; while folds do not run (none configured, or failing), each catch-up
-- adds one. GetCompressionCache's `complete_only` and GetSession's `progress` read the
-- session's summaries from the newest down to the first complete one on the primary key:
-- 2,000 tuples of `compression_caches` behind 2,000 catch-up summaries
-- (tests/storage/slots/test_complete_cache_reads.py). This index holds the complete ones
-- only: the statements that ask for one say `NOT lossy` (storage_service.slots.caches
-- GET_COMPLETE_CACHE, storage_service.jobs.repository PROGRESS), so a plan that knows no
-- parameter takes it too.
--
-- Built CONCURRENTLY, outside a transaction, so puts go on while it is built; safe to run
-- again after a crash (a stopped build leaves an invalid index, dropped first).
--
-- stello: outside a transaction
DROP INDEX CONCURRENTLY IF EXISTS compression_caches_complete;
CREATE INDEX CONCURRENTLY compression_caches_complete
    ON compression_caches (space_id, session_id, covered_until_seq)
    WHERE NOT lossy;
