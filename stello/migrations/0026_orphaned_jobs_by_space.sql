-- ListOrphanedJobs with a tenant key reads its space's orphans, not its
-- space's jobs nor every space's unfinished runs.
--
-- `ORPHANED_IN_SPACE` (storage_service/jobs/repository.py) had two indexes,
-- neither fit: `background_jobs_orphaned` (0020) holds the unfinished runs of
-- every space, so the read passed every other space's (the stopped runs of a
-- tenant whose gateway is gone stay there until taken over), and the primary
-- key holds every job of the space, finished ones included. When the
-- statistics called the space small (grown since the last ANALYZE) and other
-- spaces' unfinished runs many, the planner took the primary key: 60,000
-- tuples to list 10 orphans of a space whose 30,000 sessions each ran a job
-- (tests/storage/jobs/test_orphaned_reads.py). This one holds the space's
-- unfinished runs in the listing's order; `background_jobs_orphaned` stays
-- for the read across spaces (an admin key). One more entry is written per
-- claim and renewal of a run, as that index already costs.
--
-- The statement runs as it is on Citus: an index of a distributed table is
-- created on every shard.
CREATE INDEX background_jobs_orphaned_space ON background_jobs (space_id, expires_at NULLS FIRST)
    WHERE status IN ('running', 'stopped');
