-- A turn's outcome is never misreported (DESIGN §4.2): the token of the turn
-- lease that a committed Transact released (its ReleaseTurnOp), kept in the
-- session's row. A retried commit whose first attempt committed, its reply
-- lost, finds its own token here instead of a live lease, and so learns that
-- the turn is stored (Transact answers the precondition failure with type
-- `turn_lease_released`). ReleaseTurn (a lease given back without a commit)
-- leaves it as it is. Storage writes it, under the row lock.
ALTER TABLE sessions ADD COLUMN released_turn_token uuid;

-- How many shared memory entries each space holds (DESIGN §4.5), kept by the
-- writes that add or remove an entry, in their transaction: a turn that shows
-- the index reads this one row instead of counting the space's entries, and a
-- new entry past the cap (STELLO_STORAGE_MAX_SHARED_MEMORY_ENTRIES) is refused
-- under this row's lock. Only creations and removals touch it; an upsert of an
-- existing slug does not. No row = no entries.
CREATE TABLE shared_memory_counts (
    space_id uuid PRIMARY KEY REFERENCES spaces (id) ON DELETE CASCADE,
    entries  integer NOT NULL CHECK (entries >= 0)
);

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once, before it is filled; on a Citus coordinator
-- that is not distributed yet (and on plain PostgreSQL) it waits for
-- `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('shared_memory_counts', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;

-- The spaces that hold entries already (grouped by the distribution column:
-- on Citus each shard counts its own spaces).
INSERT INTO shared_memory_counts (space_id, entries)
SELECT space_id, count(*) FROM shared_memory GROUP BY space_id;
