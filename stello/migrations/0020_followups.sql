-- Follow-ups of issues #33 and #38.
--
-- 1. Background jobs left without a gateway (DESIGN §4.8): a claim whose
--    holder died (`expires_at` passed) or a run its gateway STOPPED on
--    shutdown. The gateway's runner lists them every few seconds
--    (storage's ListOrphanedJobs) and takes each over by ClaimJob, with no
--    new trigger. With an admin-scope key the list spans every space, so this
--    index does not lead with space_id: a maintenance read across spaces
--    (docs/scaling.md "Maintenance paths"), a plain index on each shard. Only
--    unfinished runs are in it: the rows of jobs that ended stay out.
CREATE INDEX background_jobs_orphaned ON background_jobs (expires_at NULLS FIRST)
    WHERE status IN ('running', 'stopped');
