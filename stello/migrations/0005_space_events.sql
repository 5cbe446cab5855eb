-- The space outbox (DESIGN §4.6): every committed change of a space writes an
-- event in its own transaction; WatchSpace streams them by position.
--
-- A position is taken as the last statement of the writing transaction
-- (stello.events.Outbox): the space's row below stays locked until the commit,
-- so positions are handed out in commit order and a reader that saw position
-- N can never later find a smaller one committed (nothing is skipped).
-- Aborted transactions give their positions back with the row's update.
CREATE TABLE space_positions (
    space_id        uuid PRIMARY KEY REFERENCES spaces (id) ON DELETE CASCADE,
    -- the newest position handed out
    last_position   bigint NOT NULL,
    -- every event at or below this position was purged (retention): an older
    -- cursor is FAILED_PRECONDITION CURSOR_EXPIRED
    purged_through  bigint NOT NULL DEFAULT 0
);

-- Ids, kinds and seqs only, never labels or contents, so erasing a session
-- erases what it said (no foreign key to sessions: an event outlives them).
CREATE TABLE space_events (
    space_id     uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    position     bigint NOT NULL,
    kind         text NOT NULL,
    session_id   uuid,
    other_id     uuid,
    first_seq    bigint,
    last_seq     bigint,
    session_ids  uuid[],
    -- taken under the position lock: increases with position
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (space_id, position)
);

-- The retention purge walks each space's oldest events.
CREATE INDEX space_events_created ON space_events (space_id, created_at);

-- Tenant tables, co-located with sessions where Citus runs (docs/scaling.md).
-- Where the schema is already distributed (stello.distribution), a new tenant
-- table joins it at once; on a Citus coordinator that is not distributed yet
-- (and on plain PostgreSQL) the table waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('space_positions', 'space_id', colocate_with => 'sessions');
      PERFORM create_distributed_table('space_events', 'space_id', colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
