-- Session metadata (issue #37): string keys to string values per session,
-- written by the tree (CreateSession, UpdateSessionMetadata) and read with the
-- session (GetNode with config, ListAll), and the indexes that serve every
-- filter of ListAll (ListSessionDigests) without a scan of the space.
--
-- 1. A side table rather than a JSON column under GIN: a GIN index cannot
--    lead with space_id without btree_gin, and equality on (key, value) is a
--    btree range. `created_at` is the session's own (never changed), copied
--    here so a filtered page walks `session_metadata_match` in the listing's
--    (created_at, id) order and reads only its page, however many sessions
--    match. Rows go with their session (ON DELETE CASCADE: the sweep of
--    provisional sessions and the erasure job delete sessions, and these rows
--    with them, in the same statement); a session being erased is hidden, and
--    every read joins the visible session.
CREATE TABLE session_metadata (
    space_id    uuid NOT NULL,
    session_id  uuid NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (space_id, session_id, key),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);
CREATE INDEX session_metadata_match
    ON session_metadata (space_id, key, value, created_at, session_id);

-- 2. ListAll's other filters, each a range of one index in (created_at, id)
--    order where the order can be kept (status, parent, root), else a range
--    that reads only the matches (label prefix: text_pattern_ops, so byte
--    order whatever the collation; updated_at).
CREATE INDEX sessions_status_created ON sessions (space_id, status, created_at, id);
CREATE INDEX sessions_parent_created ON sessions (space_id, parent_id, created_at, id);
CREATE INDEX sessions_root_created ON sessions (space_id, root_id, created_at, id);
CREATE INDEX sessions_label_prefix ON sessions (space_id, label text_pattern_ops);
CREATE INDEX sessions_updated ON sessions (space_id, updated_at, id);

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once; elsewhere it waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('session_metadata', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
