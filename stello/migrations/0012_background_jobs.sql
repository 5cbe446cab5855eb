-- The gateway's background jobs (DESIGN §4.8, issue #33): consolidations and
-- the background fold run at most once per (session, kind) across every
-- gateway process, decided here rather than in a process's memory.
--
-- One row per session and kind of job that ever ran. A run holds the job
-- while `token` is its claim: ClaimJob grants it when no claim is live (the
-- job is new, its last run ended, or `expires_at` passed: the gateway that
-- held it died, and its job is taken over), the runner renews it every third
-- of its TTL, and the run's last save gives it back with the run's `status`.
-- The progress a run saved (`covered_until_seq`; the data itself is the
-- memory or a summary, written in the same transaction) stays for the next
-- run. Claims are taken by a plain `SELECT ... FOR UPDATE` of this row pinned
-- by space_id, and times are computed in SET clauses or passed as parameters
-- (DESIGN §4.7). The row goes with its session.
CREATE TABLE background_jobs (
    space_id           uuid NOT NULL,
    session_id         uuid NOT NULL,
    kind               text NOT NULL,
    status             text NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'done', 'budget_spent', 'stopped', 'failed')),
    token              uuid,
    expires_at         timestamptz,
    covered_until_seq  bigint NOT NULL DEFAULT 0 CHECK (covered_until_seq >= 0),
    model_calls        integer NOT NULL DEFAULT 0 CHECK (model_calls >= 0),
    tokens             bigint NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    runs               integer NOT NULL DEFAULT 0,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, session_id, kind),
    CHECK ((token IS NULL) = (expires_at IS NULL)),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);

-- The memory's version: one more on every write of the memory slot, so a
-- consolidation saves only over the memory it read (a compare-and-set, a
-- MemoryVersionCheck) and a put made while it ran is never overwritten.
ALTER TABLE session_slots ADD COLUMN memory_version bigint NOT NULL DEFAULT 0;
-- Memories written before this migration count as written once.
UPDATE session_slots SET memory_version = 1 WHERE memory IS NOT NULL;

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once; elsewhere it waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('background_jobs', 'space_id', colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
