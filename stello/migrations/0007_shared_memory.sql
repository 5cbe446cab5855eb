-- Shared memory (DESIGN §4.5, STELLO-SPEC §1.11): per space, entries
-- {slug, summary, body} in insertion order. An upsert of an existing slug
-- keeps its created_at, so it keeps its place; a removed slug that comes back
-- goes to the end. The order is (created_at, slug) within the space: no
-- sequence spans spaces, and no counter row serialises the space's writers.
CREATE TABLE shared_memory (
    space_id    uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    -- byte order, so the paging key compares the same everywhere
    slug        text COLLATE "C" NOT NULL,
    summary     text NOT NULL,
    body        text NOT NULL,
    -- clock_timestamp() of the first insert: the entry's place
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (space_id, slug)
);

CREATE INDEX shared_memory_order ON shared_memory (space_id, created_at, slug);

-- Shared memory events name the entry by its slug (its key, as a session's id).
ALTER TABLE space_events ADD COLUMN slug text;

-- Where the schema is already distributed (stello.distribution), a new tenant
-- table joins it at once; on a Citus coordinator that is not distributed yet
-- (and on plain PostgreSQL) the table waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('shared_memory', 'space_id', colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
