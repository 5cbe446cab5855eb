-- A removed shared memory entry leaves nothing in remembered replies (DESIGN §4.8,
-- explore14 F3).
--
-- An UpsertSharedMemoryEntry's reply (storage's, and the gateway's
-- `stello_memory_remember` tool's, whose writes are storage upserts under a
-- `tool/...` request id) holds the entry's slug and summary. Such a reply is
-- linked to its entry by the entry's surrogate id (`shared_memory.entry_id`,
-- migration 0011_1: kept by a replace, new after a remove), and the
-- transaction that removes the entry erases the replies linked to it, as a
-- session's erasure erases its replies (`stello.idempotency.ERASE_ENTRY_REPLIES`:
-- a tombstone, so a replay answers NOT_FOUND REQUEST_ERASED, never the old
-- text). A replace keeps the entry, so its replies stay. Links hold ids only
-- and go with their key (expiry: cascade); no key to `shared_memory` (its row
-- goes first, in the removal).
CREATE TABLE idempotency_key_entries (
    space_id    uuid NOT NULL,
    entry_id    uuid NOT NULL,
    scope       text NOT NULL,
    request_id  text NOT NULL,
    PRIMARY KEY (space_id, entry_id, scope, request_id),
    FOREIGN KEY (space_id, scope, request_id)
        REFERENCES idempotency_keys (space_id, scope, request_id) ON DELETE CASCADE
);
CREATE INDEX idempotency_key_entries_key
    ON idempotency_key_entries (space_id, scope, request_id);

-- Where the schema is already distributed (stello.distribution), a new tenant
-- table joins it at once; on a Citus coordinator that is not distributed yet
-- (and on plain PostgreSQL) the table waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('idempotency_key_entries', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
