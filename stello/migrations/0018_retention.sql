-- Retention (issue #38): a space's sessions may expire. A per-space policy
-- archives the sessions of a root's subtree once the whole subtree has been
-- idle for N days, and deletes a subtree whose sessions have all been archived
-- for M days (each optional); a pinned session keeps its whole subtree.
--
-- 1. What the judgement reads, by index, never by walking a tree: a subtree
--    is every session with its root_id. Its last activity is the newest
--    last_active_at per status (one backward probe of `sessions_root_activity`
--    each), whether a session of it is active is one probe of the same index,
--    when it was archived is the newest `archived_at` (a probe of
--    `sessions_root_archived`), and whether it is pinned a probe of
--    `sessions_root_pinned`. `archived_at` is written by every status change
--    (tree Archive/Unarchive, storage PutSession); sessions archived before
--    this migration count from their last update.
ALTER TABLE sessions
    ADD COLUMN pinned boolean NOT NULL DEFAULT false,
    ADD COLUMN archived_at timestamptz;
UPDATE sessions SET archived_at = updated_at WHERE status = 'archived';
CREATE INDEX sessions_root_activity ON sessions (space_id, root_id, status, last_active_at);
CREATE INDEX sessions_root_archived ON sessions (space_id, root_id, archived_at)
    WHERE archived_at IS NOT NULL;
CREATE INDEX sessions_root_pinned ON sessions (space_id, root_id) WHERE pinned;

-- 2. The policy, one row per space that has one (no row: nothing expires),
--    and where the sweep of the space stands: it walks the space's roots in
--    (created_at, id) order, a bounded batch per transaction, and saves the
--    last root it judged with the batch (`cursor_*`), so a sweep killed
--    between batches goes on from there; a finished pass clears the cursor and
--    sets `last_pass_at`. A batch takes the row with SELECT ... FOR UPDATE SKIP
--    LOCKED pinned by space_id: one replica sweeps a space at a time, and the
--    batches of a pass are each done once whichever replica does them.
CREATE TABLE retention_policies (
    space_id            uuid PRIMARY KEY REFERENCES spaces (id) ON DELETE CASCADE,
    archive_after_days  integer CHECK (archive_after_days > 0),
    delete_after_days   integer CHECK (delete_after_days > 0),
    cursor_created_at   timestamptz,
    cursor_id           uuid,
    last_pass_at        timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((cursor_created_at IS NULL) = (cursor_id IS NULL))
);

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once; elsewhere it waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('retention_policies', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
