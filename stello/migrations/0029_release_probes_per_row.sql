-- A release probes per row, whatever plan the function's statements get (DESIGN §4.4).
--
-- PL/pgSQL keeps a plan per statement of `stello_release_records` (0028), and
-- after a few calls in one connection a generic one, planned without the
-- space and sessions' values. In its deletion of the dropped rows, the check
-- that no other segment still reads a row (NOT EXISTS) was then planned as a
-- hash anti-join over a sequential scan of `record_segments`, and the holder's
-- lineage cut as a hash join over the space's `session_lineages`: a TrimRecords
-- of 20 records at the end of a chain of 2,000 forks read 31,356 tuples of
-- `record_segments` under `plan_cache_mode = force_generic_plan`, and one
-- storage connection in CI read 4,269 at depth 100 once its plans had turned
-- generic (tests/storage/records/test_fork_depth_reads.py).
--
-- The lock of the readers of the released rows was planned, generically, as a
-- walk of every session of the space probing each one's segments: 4,210 tuples
-- of `record_segments` for a trim at depth 1, once a storage connection had run
-- enough releases (test_fork_depth_reads after test_fork_depth in one process).
--
-- The two checks are now scalar subqueries, which the planner runs per row as
-- one index probe each (a range of `record_segments_holder`, a
-- `session_lineages` primary key), and the readers are found first, one range
-- of `record_segments_holder` per released session (LATERAL, OFFSET 0), then
-- each locked by one primary-key probe in id order, as a trim's own lock finds
-- them (storage's `LOCK_FOR_TRIM`), under any plan. Nothing else changes.

CREATE OR REPLACE FUNCTION stello_release_records(p_space uuid, p_sessions uuid[], p_through bigint)
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
            SELECT l.id
            FROM (SELECT DISTINCT r.session_id AS id
                  FROM unnest(p_sessions) AS h (id)
                  CROSS JOIN LATERAL (
                      SELECT g.session_id FROM record_segments g
                      WHERE g.space_id = p_space AND g.holder_id = h.id
                        AND g.from_seq <= through AND g.session_id <> ALL (p_sessions)
                      OFFSET 0
                  ) r
                  ORDER BY 1) t
            CROSS JOIN LATERAL (
                SELECT s.id FROM sessions s
                WHERE s.space_id = p_space AND s.id = t.id
                  AND (p_through IS NULL OR s.provisional_until IS DISTINCT FROM 'infinity')
                FOR NO KEY UPDATE OF s
            ) l
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
              AND (p_through IS NULL OR s.provisional_until IS DISTINCT FROM 'infinity')
        ), heirs AS (
            SELECT DISTINCT ON (n.holder) n.holder, n.reader AS heir
            FROM needs n
            ORDER BY n.holder, n.upto DESC, n.visible DESC, n.reader
        ), moved AS (
            INSERT INTO records (space_id, session_id, seq, role, content, tool_calls,
                                 tool_call_id, created_at, metadata, token_estimate,
                                 token_cumulative)
            SELECT DISTINCT ON (h.heir, r.seq)
                   p_space, h.heir, r.seq, r.role, r.content, r.tool_calls, r.tool_call_id,
                   r.created_at, r.metadata, r.token_estimate, r.token_cumulative
            FROM needs n
            JOIN heirs h ON h.holder = n.holder
            JOIN records r ON r.space_id = p_space AND r.session_id = n.holder
                          AND r.seq >= n.from_seq AND r.seq <= n.upto
            ORDER BY h.heir, r.seq, n.holder
            ON CONFLICT DO NOTHING
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
          AND g.from_seq <= through AND g.session_id <> ALL (p_sessions)
          AND g.session_id IN (SELECT n.reader FROM needs n);
    END IF;

    -- A trim splits a reader's segment that crosses `p_through` (its part above
    -- stays with the holder): a reader now past the cap is compacted (it is
    -- locked above; a session being erased is no reader of a trim). Rows it
    -- then copies from a holder stay with that holder until the holder goes or
    -- releases them.
    IF p_through IS NOT NULL AND locked > 0 THEN
        PERFORM stello_compact_segments(p_space, d.session_id, 16)
        FROM (
            SELECT g.session_id
            FROM record_segments g
            WHERE g.space_id = p_space
              AND g.session_id IN (SELECT x.session_id FROM record_segments x
                                   JOIN sessions s ON s.space_id = x.space_id
                                                  AND s.id = x.session_id
                                   WHERE x.space_id = p_space AND x.holder_id = ANY (p_sessions)
                                     AND x.session_id <> ALL (p_sessions)
                                     AND s.provisional_until IS DISTINCT FROM 'infinity')
            GROUP BY g.session_id
            HAVING count(*) > 16
        ) d;
    END IF;

    WITH dropped AS MATERIALIZED (
        SELECT g.holder_id AS holder, g.from_seq AS lo,
               LEAST(g.to_seq, through,
                     COALESCE((SELECT l.until_seq FROM session_lineages l
                               WHERE l.space_id = p_space AND l.session_id = g.holder_id),
                              0)) AS hi
        FROM record_segments g
        WHERE g.space_id = p_space AND g.session_id = ANY (p_sessions)
          AND g.from_seq <= through AND g.holder_id <> ALL (p_sessions)
    )
    DELETE FROM records r
    USING dropped d
    WHERE r.space_id = p_space AND r.session_id = d.holder
      AND r.seq >= d.lo AND r.seq <= d.hi
      AND (SELECT true FROM record_segments g
           WHERE g.space_id = p_space AND g.holder_id = d.holder
             AND g.session_id <> ALL (p_sessions)
             AND r.seq >= g.from_seq AND r.seq <= g.to_seq
           LIMIT 1) IS NULL;

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
