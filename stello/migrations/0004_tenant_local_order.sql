-- Nothing orders or cascades across tenants, so Citus can shard every tenant
-- table by space_id (docs/scaling.md; tests/distribution checks the catalog).
--
-- 1. session_refs.position was an identity column: one sequence for every
--    space. It becomes a per-session order (0, 1, ... per from-session) that
--    AddRef assigns as max + 1 under the from-session's row lock, like sibling
--    indexes. Existing refs are renumbered in their old order.
ALTER TABLE session_refs ALTER COLUMN position DROP IDENTITY;
DROP INDEX session_refs_order;
UPDATE session_refs r
SET position = o.n
FROM (
    SELECT space_id, from_id, to_id,
           row_number() OVER (PARTITION BY space_id, from_id ORDER BY position) - 1 AS n
    FROM session_refs
) o
WHERE r.space_id = o.space_id AND r.from_id = o.from_id AND r.to_id = o.to_id;
CREATE UNIQUE INDEX session_refs_order ON session_refs (space_id, from_id, position);

-- 2. Citus refuses ON DELETE SET NULL on a foreign key that holds the
--    distribution column, even with a column list (citusdata/citus#7132). The
--    source key becomes NO ACTION, like parent_id: DeleteSubtree clears the
--    source of the sessions outside the erased set in the same statement.
ALTER TABLE sessions DROP CONSTRAINT sessions_space_id_source_session_id_fkey;
ALTER TABLE sessions ADD CONSTRAINT sessions_space_id_source_session_id_fkey
    FOREIGN KEY (space_id, source_session_id) REFERENCES sessions (space_id, id);
