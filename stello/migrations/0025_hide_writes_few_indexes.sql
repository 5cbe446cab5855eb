-- DeleteSubtree's hide writes few index entries per session (issue #33 item 2).
--
-- The hide sets `provisional_until = 'infinity'` on every session of the
-- subtree (0011_2). That changes an indexed column, so no update of it is
-- HOT: PostgreSQL writes the new row version into every index of `sessions`
-- whose predicate it satisfies. With the 16 indexes of 0024 that was 16.5 WAL
-- records per hidden session, the whole cost of the hide (measured by
-- bench/bench_delete.py: 9 s of a 10 s hide of 50,000 sessions).
--
-- The indexes below serve reads only, and every read of `sessions` asks for
-- visible rows (`provisional_until IS NULL`, the one visibility predicate):
-- they now hold no session being erased, so a row the hide writes gets no
-- entry in them. Their predicate is `provisional_until IS NULL OR
-- provisional_until <> 'infinity'` (provisional sessions stay in: they are
-- few and short-lived), not `provisional_until IS NULL`: a read's
-- `provisional_until IS NULL` implies either, but on a table never analyzed
-- the planner guesses `IS NULL` true of 0.5 % of the rows, and a partial index
-- under that predicate looked 200 times smaller than it is: walks chose one
-- that matched their space_id only and read the whole space per step
-- (tests/tree/test_ancestors_unanalyzed.py). The `<>` arm makes the guess
-- 99.5 %, as it is.
--
-- Those left whole are the ones that must see every row: the primary key, `sessions_parent` (the parent key's check, the
-- subtree walks, the next sibling index) and `sessions_erasing` (the erasure
-- job). Two more hold only the rows their readers look for:
-- `sessions_provisional` the sessions the sweep may remove (not those being
-- erased, the job's: the sweep's statements exclude them already), and
-- `sessions_source` the sessions that have a source (the source key's check
-- and UNSOURCE look for a given one). A hidden row is written into the heap
-- and three indexes, four with a source.
--
-- A read can use one of these indexes only when its WHERE implies the
-- predicate, as every read's `provisional_until IS NULL` on that table does
-- (one arm of the OR): SearchSessions' label probe and ListAll's fenced range
-- say so now, as UNSOURCE says `source_session_id IS NOT NULL`. A new read
-- index of `sessions` gets the same predicate (tests/tree/test_delete_cost.py
-- checks the catalog).
--
-- The statements run as they are on Citus: an index of a distributed table
-- is created on every shard.
DROP INDEX sessions_created;
CREATE INDEX sessions_created ON sessions (space_id, created_at, id)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_roots;
CREATE INDEX sessions_roots ON sessions (space_id, created_at, id)
    WHERE parent_id IS NULL AND (provisional_until IS NULL OR provisional_until <> 'infinity');
DROP INDEX sessions_status_created;
CREATE INDEX sessions_status_created ON sessions (space_id, status, created_at, id)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_parent_created;
CREATE INDEX sessions_parent_created ON sessions (space_id, parent_id, created_at, id)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_root_created;
CREATE INDEX sessions_root_created ON sessions (space_id, root_id, created_at, id)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_label_prefix;
CREATE INDEX sessions_label_prefix ON sessions (space_id, label text_pattern_ops)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_updated;
CREATE INDEX sessions_updated ON sessions (space_id, updated_at, id)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_root_activity;
CREATE INDEX sessions_root_activity ON sessions (space_id, root_id, status, last_active_day)
    WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_root_archived;
CREATE INDEX sessions_root_archived ON sessions (space_id, root_id, archived_at)
    WHERE archived_at IS NOT NULL AND (provisional_until IS NULL OR provisional_until <> 'infinity');
DROP INDEX sessions_root_pinned;
CREATE INDEX sessions_root_pinned ON sessions (space_id, root_id)
    WHERE pinned AND (provisional_until IS NULL OR provisional_until <> 'infinity');
DROP INDEX sessions_label_search;
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off) WHERE provisional_until IS NULL OR provisional_until <> 'infinity';
DROP INDEX sessions_provisional;
CREATE INDEX sessions_provisional ON sessions (provisional_until)
    WHERE provisional_until IS NOT NULL AND provisional_until <> 'infinity';
DROP INDEX sessions_source;
CREATE INDEX sessions_source ON sessions (space_id, source_session_id)
    WHERE source_session_id IS NOT NULL;
