-- DeleteSubtree's hide is a HOT update (issue #33 item 2).
--
-- The hide sets `provisional_until = 'infinity'` on every session of the subtree
-- (0011_2). While an index of `sessions` names that column (in its key, an
-- expression or its predicate), no such update is HOT: each hidden session was a
-- new row version on another page and a new entry in the primary key,
-- `sessions_parent` and `sessions_erasing` (migration 0025 kept the read indexes
-- out of it): 3.9 s and 150 MB of WAL to hide 200,000 sessions, measured before
-- this migration. A HOT update writes the new version beside the old one on its
-- page and no index entry: 1.0 s and 16 MB. It needs two things:
--
-- 1. No index names `provisional_until`. The read indexes lose 0025's predicate
--    (a hidden row keeps its entries until the erasure job deletes it; every read
--    already tests `provisional_until IS NULL` on the row). The sweep's index is
--    on `sweep_at`, a stored generated column that holds `provisional_until` only
--    while a session is provisional and due to be swept: NULL for a visible
--    session and for one being erased, so the hide of a committed session leaves
--    it unchanged. `sessions_erasing` goes: the hide writes the ids it hid, by
--    depth, in chunks to `session_erasures`, and the job reads its work there.
-- 2. Room on the page: `sessions` keeps more than half of each page free
--    (fillfactor 45), so every row on a page can have one new version there, 8
--    bytes longer (the timestamp where NULL was; at fillfactor 50 one of 2,000
--    hidden sessions did not fit); the hide's own walk prunes what other updates
--    left. Adding the stored column rewrites the table under the new fillfactor
--    (the heap grows 2.2 times).
--
-- tests/tree/test_delete_cost.py checks the catalog (no index names the column)
-- and that every hidden session of a hide was updated HOT.
--
-- The statements run as they are on Citus: each is applied to every shard of the
-- distributed `sessions`.

ALTER TABLE sessions SET (fillfactor = 45);

ALTER TABLE sessions ADD COLUMN sweep_at timestamptz GENERATED ALWAYS AS (
    CASE WHEN provisional_until <> 'infinity' THEN provisional_until END
) STORED;

DROP INDEX sessions_provisional;
CREATE INDEX sessions_sweep ON sessions (sweep_at) WHERE sweep_at IS NOT NULL;
DROP INDEX sessions_erasing;

DROP INDEX sessions_created;
CREATE INDEX sessions_created ON sessions (space_id, created_at, id);
DROP INDEX sessions_roots;
CREATE INDEX sessions_roots ON sessions (space_id, created_at, id) WHERE parent_id IS NULL;
DROP INDEX sessions_status_created;
CREATE INDEX sessions_status_created ON sessions (space_id, status, created_at, id);
DROP INDEX sessions_parent_created;
CREATE INDEX sessions_parent_created ON sessions (space_id, parent_id, created_at, id);
DROP INDEX sessions_root_created;
CREATE INDEX sessions_root_created ON sessions (space_id, root_id, created_at, id);
DROP INDEX sessions_label_prefix;
CREATE INDEX sessions_label_prefix ON sessions (space_id, label text_pattern_ops);
DROP INDEX sessions_updated;
CREATE INDEX sessions_updated ON sessions (space_id, updated_at, id);
DROP INDEX sessions_root_activity;
CREATE INDEX sessions_root_activity ON sessions (space_id, root_id, status, last_active_day);
DROP INDEX sessions_root_archived;
CREATE INDEX sessions_root_archived ON sessions (space_id, root_id, archived_at)
    WHERE archived_at IS NOT NULL;
DROP INDEX sessions_root_pinned;
CREATE INDEX sessions_root_pinned ON sessions (space_id, root_id) WHERE pinned;
DROP INDEX sessions_label_search;
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off);

-- The erasure job's work: the sessions of one hide (`root_id` the session it was
-- asked to erase), by depth then id, in chunks (`chunk` their order, `min_depth`
-- the depth of the first). The job takes the chunk of a space with the greatest
-- `min_depth`, the later of one hide's first, and erases its ids from the last:
-- a session's descendants are then always erased before it, within one hide and
-- across hides (a later hide can hold only the ancestors of an earlier one's
-- sessions, in chunks of smaller `min_depth`). A chunk shrinks in the transaction
-- of each batch that erases its last ids, and goes with the last of them: a job
-- killed between batches resumes where it stopped.
CREATE TABLE session_erasures (
    space_id   uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    root_id    uuid NOT NULL,
    chunk      integer NOT NULL,
    min_depth  integer NOT NULL,
    ids        uuid[] NOT NULL,
    PRIMARY KEY (space_id, root_id, chunk)
);
CREATE INDEX session_erasures_deepest ON session_erasures (space_id, min_depth, chunk);

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once; elsewhere it waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('session_erasures', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;

-- Sessions being erased now (hidden before this migration): a chunk per space, depth
-- and thousand ids, each its own hide (`root_id` its first id).
INSERT INTO session_erasures (space_id, root_id, chunk, min_depth, ids)
SELECT space_id, (array_agg(id ORDER BY id))[1], 0, depth, array_agg(id ORDER BY id)
FROM (
    SELECT space_id, id, depth,
           (row_number() OVER (PARTITION BY space_id, depth ORDER BY id) - 1) / 1000 AS part
    FROM sessions WHERE provisional_until = 'infinity'
) hidden
GROUP BY space_id, depth, part;
