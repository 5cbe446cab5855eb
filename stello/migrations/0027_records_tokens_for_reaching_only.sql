-- records_tokens serves REACHING's probe only: a read of a seq range can no longer take it.
--
-- `records_tokens` (0006, 0009) is (space_id, session_id, token_cumulative, seq):
-- it holds every column a probe of a view's part by seq reads when that probe
-- wants only the cumulative (REACHING's choice of a part) or only the seq, so
-- the planner could answer such a probe with an Index Only Scan of it, filtering
-- the seq range and sorting, instead of one range of the primary key. Once every
-- page of `records` is all-visible (after a VACUUM, autovacuum's included) and
-- the statistics make every session look a row or two long (a table of many
-- small sessions: a database many tenants, or many tests, share), that scan
-- costs less to the planner than the primary key's, which fetches the heap row,
-- and it read every row of every part: the whole view, 2,146 tuples at the end
-- of a chain of 2,000 forks for one BeginTurn, 147 at depth 1
-- (tests/storage/records/test_fork_depth_reads.py). A cost that grew with the
-- history, decided by the visibility map and the statistics.
--
-- Under a predicate, the index is considered only for a statement whose
-- conditions name it: REACHING's probe of the cumulative says
-- `token_cumulative >= 0` (true of every row: estimates and their sums are
-- never negative), no other statement does, so every read of a seq range takes
-- the primary key whatever the statistics.
--
-- `records` is the largest table: the new index is built CONCURRENTLY, outside
-- a transaction, so appends go on while it is built (tests/kernel/test_migrate.py).
-- Each statement is safe to run again after a crash: a run stopped before the
-- rename builds the new index again; one stopped between the drop and the
-- rename leaves REACHING without the index until the next run builds it (its
-- probe then reads a holder's rows by the primary key).
--
-- stello: outside a transaction
DROP INDEX CONCURRENTLY IF EXISTS records_tokens_reaching;
CREATE INDEX CONCURRENTLY records_tokens_reaching
    ON records (space_id, session_id, token_cumulative, seq)
    WHERE token_cumulative >= 0;
DROP INDEX CONCURRENTLY IF EXISTS records_tokens;
ALTER INDEX records_tokens_reaching RENAME TO records_tokens;
