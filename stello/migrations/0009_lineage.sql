-- Fork by reference (DESIGN §4.4, §5.15): a Fork INHERIT writes a lineage
-- instead of copying records.
--
-- A session's records are its *view*: its segments (inherited ranges, each
-- "the records of `holder_id` with seq in [from_seq, to_seq]"), then its own
-- records (session_id = itself, seq > its lineage's until_seq). Segments are
-- flattened: a fork of a fork lists every holder directly, so a read is one
-- index range per segment, never a walk up a chain. Seqs are kept verbatim:
-- the child's record n is the source's record n through the cut, so every
-- row a holder keeps is the record of that seq on the line of each of its
-- readers (the invariant `stello_release_records` relies on).

-- One row per INHERIT fork: where its records came from and the last seq it
-- inherited (its own records are numbered after it). The source key has no
-- action: a concurrent delete of the source cannot leave it dangling (the
-- fork either sees the source or fails). `source_id` becomes NULL when the
-- source is deleted (its rows then live on with an heir).
CREATE TABLE session_lineages (
    space_id    uuid NOT NULL,
    session_id  uuid NOT NULL,
    source_id   uuid,
    until_seq   bigint NOT NULL CHECK (until_seq >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, session_id),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE,
    FOREIGN KEY (space_id, source_id) REFERENCES sessions (space_id, id)
);
CREATE INDEX session_lineages_source ON session_lineages (space_id, source_id);

-- The inherited ranges of a session, disjoint and below its own records.
-- The holder key has no action: rows a reader needs are moved before their
-- holder goes (a delete that did not move them fails instead of losing them).
CREATE TABLE record_segments (
    space_id    uuid NOT NULL,
    session_id  uuid NOT NULL,
    from_seq    bigint NOT NULL CHECK (from_seq >= 1),
    to_seq      bigint NOT NULL,
    holder_id   uuid NOT NULL,
    PRIMARY KEY (space_id, session_id, from_seq),
    CHECK (to_seq >= from_seq),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE,
    FOREIGN KEY (space_id, holder_id) REFERENCES sessions (space_id, id)
);
CREATE INDEX record_segments_holder ON record_segments (space_id, holder_id, session_id);

-- The newest records within a budget, found on a holder's rows: the first
-- record (by seq) whose cumulative estimate reaches a floor is one descent of
-- this index (cumulative, then seq: equal cumulatives follow zero-token
-- records), with no seq bound for the planner to weigh.
DROP INDEX records_tokens;
CREATE INDEX records_tokens ON records (space_id, session_id, token_cumulative, seq);

-- `p_sessions` (of space `p_space`) stop showing their records through seq
-- `p_through` (TrimRecords), or all of them because they are being deleted
-- (`p_through` NULL: DeleteSubtree and the sweep call it just before their
-- DELETE). Rows that other sessions still read are not lost: for each
-- releasing holder, the rows its surviving readers' segments cover move, once,
-- to one heir (the reader whose segment reaches highest: every row another
-- reader needs is on its line; of equals, a visible one; `UPDATE records SET
-- session_id`, seqs kept), and the readers'
-- segments point at the heir (a segment crossing `p_through` is split: the
-- part above stays with its holder). Then the rest of the released rows go,
-- and so do rows an heir kept only for the releasing sessions; the releasing
-- sessions' own segments are narrowed (trim) or removed with their lineages
-- (delete; a surviving fork of a deleted source keeps its records and loses
-- only its `source_id`). No row stays that no session shows.
--
-- Readers are row-locked first (FOR UPDATE, until no new one appears): a
-- Fork INHERIT holds its source's row (FOR SHARE) while it copies the
-- source's segments, so no fork can copy a segment this call is repointing.
-- The statement count does not depend on how many readers there are.
CREATE FUNCTION stello_release_records(p_space uuid, p_sessions uuid[], p_through bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    through   bigint := COALESCE(p_through, 9223372036854775807);
    seen      integer := -1;
    locked    integer;
BEGIN
    LOOP
        SELECT count(*) INTO locked FROM (
            SELECT s.id
            FROM sessions s
            WHERE s.space_id = p_space
              AND s.id IN (SELECT g.session_id
                           FROM record_segments g
                           WHERE g.space_id = p_space AND g.holder_id = ANY (p_sessions)
                             AND g.from_seq <= through AND g.session_id <> ALL (p_sessions))
            ORDER BY s.id
            FOR UPDATE OF s
        ) readers;
        EXIT WHEN locked = seen OR locked = 0;
        seen := locked;
    END LOOP;

    IF locked > 0 THEN
        WITH needs AS (
            SELECT g.session_id AS reader, g.holder_id AS holder, g.from_seq, g.to_seq,
                   LEAST(g.to_seq, through) AS upto, s.provisional_until IS NULL AS visible
            FROM record_segments g
            JOIN sessions s ON s.space_id = g.space_id AND s.id = g.session_id
            WHERE g.space_id = p_space AND g.holder_id = ANY (p_sessions)
              AND g.from_seq <= through AND g.session_id <> ALL (p_sessions)
        ), heirs AS (
            SELECT DISTINCT ON (n.holder) n.holder, n.reader AS heir
            FROM needs n
            ORDER BY n.holder, n.upto DESC, n.visible DESC, n.reader
        ), moved AS (
            UPDATE records r
            SET session_id = h.heir
            FROM needs n
            JOIN heirs h ON h.holder = n.holder
            WHERE r.space_id = p_space AND r.session_id = n.holder
              AND r.seq >= n.from_seq AND r.seq <= n.upto
        ), split AS (
            INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
            SELECT p_space, n.reader, n.upto + 1, n.to_seq, n.holder
            FROM needs n
            WHERE n.to_seq > through
        )
        UPDATE record_segments g
        SET holder_id = h.heir, to_seq = LEAST(g.to_seq, through)
        FROM heirs h
        WHERE g.space_id = p_space AND g.holder_id = h.holder
          AND g.from_seq <= through AND g.session_id <> ALL (p_sessions);
    END IF;

    -- Rows an heir keeps only for other readers go once no segment shows them:
    -- of the ranges the releasing sessions stop reading on other holders, the
    -- rows below each holder's own cut (rows it took over, not its own records)
    -- that no remaining segment covers.
    WITH dropped AS (
        SELECT g.holder_id AS holder, g.from_seq AS lo, LEAST(g.to_seq, through) AS hi,
               COALESCE(l.until_seq, 0) AS holder_cut
        FROM record_segments g
        LEFT JOIN session_lineages l ON l.space_id = g.space_id AND l.session_id = g.holder_id
        WHERE g.space_id = p_space AND g.session_id = ANY (p_sessions)
          AND g.from_seq <= through AND g.holder_id <> ALL (p_sessions)
    )
    DELETE FROM records r
    USING dropped d
    WHERE r.space_id = p_space AND r.session_id = d.holder
      AND r.seq >= d.lo AND r.seq <= LEAST(d.hi, d.holder_cut)
      AND NOT EXISTS (SELECT FROM record_segments g
                      WHERE g.space_id = p_space AND g.holder_id = d.holder
                        AND g.session_id <> ALL (p_sessions)
                        AND r.seq >= g.from_seq AND r.seq <= g.to_seq);

    DELETE FROM records
    WHERE space_id = p_space AND session_id = ANY (p_sessions) AND seq <= through;

    IF p_through IS NULL THEN
        DELETE FROM record_segments WHERE space_id = p_space AND session_id = ANY (p_sessions);
        DELETE FROM session_lineages WHERE space_id = p_space AND session_id = ANY (p_sessions);
        UPDATE session_lineages SET source_id = NULL
        WHERE space_id = p_space AND source_id = ANY (p_sessions);
    ELSE
        DELETE FROM record_segments
        WHERE space_id = p_space AND session_id = ANY (p_sessions) AND to_seq <= through;
        UPDATE record_segments SET from_seq = through + 1
        WHERE space_id = p_space AND session_id = ANY (p_sessions) AND from_seq <= through;
    END IF;
END;
$$;

-- Where the schema is already distributed (stello.distribution), a new tenant
-- table joins it at once; on a Citus coordinator that is not distributed yet
-- (and on plain PostgreSQL) the table waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('session_lineages', 'space_id', colocate_with => 'sessions');
      PERFORM create_distributed_table('record_segments', 'space_id', colocate_with => 'sessions');
      -- Called from statements routed to a space's shard: on every node, by p_space.
      PERFORM create_distributed_function('stello_release_records(uuid, uuid[], bigint)',
                                          'p_space', colocate_with => 'sessions');
    END IF;
  END IF;
END $$;
