-- Busy sessions (DESIGN §4.2, issue #38): what a turn does when another one
-- holds the session's lease — REJECT (as before), ENQUEUE (wait in line) or
-- INTERRUPT (take the lease over).
--
-- 1. The line of ENQUEUE turns waiting for a session, decided here so that it
--    is one line across every gateway. Each waiting call holds a ticket: its
--    place (`ticket`, numbered per session under the session's row lock, so
--    no global sequence orders anything), the gateway's random `waiter` token
--    of that call, and an expiry the waiting call renews like a lease (every
--    third of it, when it asks BeginTurn again): a waiter whose gateway died
--    stops holding its place within one TTL. `continuation` marks a
--    SubmitToolResults, which goes ahead of the queued Sends (they wait for
--    the pending tool calls it answers). Rows are read and written only under
--    the session's row lock, pinned by space_id, with the database's time
--    passed as a parameter (DESIGN §4.7). They go with their session.
CREATE TABLE turn_waiters (
    space_id      uuid NOT NULL,
    session_id    uuid NOT NULL,
    ticket        bigint NOT NULL CHECK (ticket > 0),
    waiter        uuid NOT NULL,
    continuation  boolean NOT NULL DEFAULT false,
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, session_id, ticket),
    UNIQUE (space_id, session_id, waiter),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);

-- 2. The lease an INTERRUPT took over: the token of the turn it stopped, so
--    that turn's next renewal (or its commit's failure) is told it was
--    interrupted rather than that its lease lapsed. Only the latest take-over
--    is kept; storage writes it under the row lock.
ALTER TABLE sessions ADD COLUMN interrupted_turn_token uuid;

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once; elsewhere it waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('turn_waiters', 'space_id', colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
