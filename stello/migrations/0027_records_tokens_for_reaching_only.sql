-- records_tokens serves REACHING's probe only: a read of a seq range can no longer take it.
--
-- `records_tokens` (0006, 0009) is (space_id, session_id, token_cumulative, seq):
-- it holds every column a probe of a view's part by seq reads when that probe
-- wants only the cumulative (REACHING's choice of a part) or only the seq
-- (TRIM_CUT's cut), so the planner could answer such a probe with an Index Only
-- Scan of it, filtering the seq range and sorting, instead of one range of the
-- primary key. Once a view's pages are all visible (after a VACUUM, autovacuum's
-- included) and the statistics make every session look a row or two long (a
-- table of many small sessions: a database many tenants, or many tests, share),
-- that scan costs less to the planner than the primary key's, which fetches the
-- heap row, and it read every row of every part: the whole view, 2,064 tuples at
-- the end of a chain of 2,000 forks for one BeginTurn, 2,048 for one TrimRecords
-- (tests/storage/records/test_fork_depth_reads.py). A cost that grew with the
-- history, decided by the visibility map and the statistics.
--
-- Under a predicate, the index is considered only for a statement whose
-- conditions name it: REACHING's probe of the cumulative says
-- `token_cumulative >= 0` (true of every row: estimates and their sums are
-- never negative), no other statement does, so every read of a seq range takes
-- the primary key whatever the statistics.
--
-- Not CONCURRENTLY (a migration is one transaction): writes to `records` wait
-- while the index is built again, as long as a build of it takes;
-- `stello migrate --pending` says so before it runs.
DROP INDEX records_tokens;
CREATE INDEX records_tokens ON records (space_id, session_id, token_cumulative, seq)
    WHERE token_cumulative >= 0;
