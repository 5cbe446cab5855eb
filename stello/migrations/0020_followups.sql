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

-- 2. A turn's update of its session is HOT again (no index entry written): the
--    retention index of 0018 held `last_active_at`, which every turn moves, so
--    no turn's update of `sessions` was HOT. Retention judges in days, so the
--    index now holds the UTC day of the last turn, a stored generated column
--    that changes at most once a day per session: a turn that leaves it as it
--    was changes no indexed column. (Adding the column rewrites `sessions`
--    once.) `last_active_at` stays exact for reads; it is in no index.
ALTER TABLE sessions ADD COLUMN last_active_day date
    GENERATED ALWAYS AS ((last_active_at AT TIME ZONE 'UTC')::date) STORED;
DROP INDEX sessions_root_activity;
CREATE INDEX sessions_root_activity ON sessions (space_id, root_id, status, last_active_day);
