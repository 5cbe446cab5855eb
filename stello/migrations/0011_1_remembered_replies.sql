-- Nothing outlives erasure (DESIGN §4.8): remembered replies and events hold
-- no data of an erased session.
--
-- 1. A remembered reply (an idempotency key's stored response) is linked to
--    every session whose data it holds: the session a tree CreateSession
--    made, the session of an AppendRecords, the sessions a Transact names
--    (or a RememberResultOp's `session_ids`). Erasing a session erases the
--    replies linked to it in the same transaction (DeleteSubtree's erasure,
--    the provisional sweep: `stello.idempotency.ERASE_LINKED` / `FORGET_LINKED`).
--    A DeleteSubtree leaves a tombstone (`erased`: no request hash, no
--    response), so a replay of the request_id answers NOT_FOUND until the key
--    expires, never the old reply and never a second run; the sweep of a
--    provisional session (never visible) forgets the key, so a retry of its
--    saga starts over. Links go with their key (expiry) and with their
--    session (cascade: its key was erased first by the same transaction).
ALTER TABLE idempotency_keys ADD COLUMN erased boolean NOT NULL DEFAULT false;

CREATE TABLE idempotency_key_sessions (
    space_id    uuid NOT NULL,
    session_id  uuid NOT NULL,
    scope       text NOT NULL,
    request_id  text NOT NULL,
    PRIMARY KEY (space_id, session_id, scope, request_id),
    FOREIGN KEY (space_id, scope, request_id)
        REFERENCES idempotency_keys (space_id, scope, request_id) ON DELETE CASCADE,
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);
CREATE INDEX idempotency_key_sessions_key
    ON idempotency_key_sessions (space_id, scope, request_id);

-- 2. Events carry no user text (DESIGN §4.6): a shared memory event names its
--    entry by a surrogate id, not by its slug (text the model or a user
--    chose). Entries get the id when first written (kept by a replace, new
--    after a remove); events already written get the id of their entry when
--    it still exists, and every slug they held is dropped with the column.
ALTER TABLE shared_memory ADD COLUMN entry_id uuid;
-- One id per row, each a parameter of its own UPDATE (Citus evaluates no
-- volatile function in a distributed UPDATE).
DO $$
DECLARE
    entry record;
    fresh uuid;
BEGIN
    FOR entry IN SELECT space_id, slug FROM shared_memory LOOP
        fresh := gen_random_uuid();
        UPDATE shared_memory SET entry_id = fresh
        WHERE space_id = entry.space_id AND slug = entry.slug;
    END LOOP;
END $$;
ALTER TABLE shared_memory ALTER COLUMN entry_id SET NOT NULL;

ALTER TABLE space_events ADD COLUMN entry_id uuid;
UPDATE space_events e SET entry_id = m.entry_id
FROM shared_memory m
WHERE m.space_id = e.space_id AND m.slug = e.slug AND e.slug IS NOT NULL;
ALTER TABLE space_events DROP COLUMN slug;

-- Where the schema is already distributed (stello.distribution), a new tenant
-- table joins it at once; on a Citus coordinator that is not distributed yet
-- (and on plain PostgreSQL) the table waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('idempotency_key_sessions', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
