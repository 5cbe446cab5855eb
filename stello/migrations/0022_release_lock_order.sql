-- One row-lock order for forks and releases (DESIGN §4.4, issue #34's race test).
--
-- A Fork INHERIT key-share locks the holders of its source's segments (in id
-- order), then its source. A release (a trim, the erasure job) locks what it
-- releases FOR UPDATE, then the readers of those rows; it locked the readers
-- FOR UPDATE too. A holder of one session's segments is often a reader of
-- another holder of them (in a chain of forks every ancestor reads from the
-- ones above it), so a fork holding a reader's key share and waiting for a
-- released holder, while the release held that holder and waited for the
-- reader, deadlocked; the order of ids never matches the order of the chain
-- (and with heirs, two sessions can read from each other: no order of holders
-- before readers exists).
--
-- The release now locks readers FOR NO KEY UPDATE: it changes their segment
-- rows, never their key, and NO KEY UPDATE still conflicts with a fork's FOR
-- SHARE of its source (no fork copies a segment this call repoints) and with
-- another release's or a trim's lock of the reader, but not with a key share.
-- So a key share waits only for a FOR UPDATE of a released (or deleted)
-- session, which is taken before any reader lock, and the fork's second step
-- (its source) waits only for locks whose holders never wait for a key
-- share. The function is migration 0013's otherwise.
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
            SELECT s.id
            FROM sessions s
            WHERE s.space_id = p_space
              AND s.id IN (SELECT g.session_id
                           FROM record_segments g
                           WHERE g.space_id = p_space AND g.holder_id = ANY (p_sessions)
                             AND g.from_seq <= through AND g.session_id <> ALL (p_sessions))
            ORDER BY s.id
            FOR NO KEY UPDATE OF s
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
          AND g.from_seq <= through AND g.session_id <> ALL (p_sessions);
    END IF;

    -- A trim splits a reader's segment that crosses `p_through` (its part above
    -- stays with the holder): a reader now past the cap is compacted (it is
    -- locked above). Rows it then copies from a holder stay with that holder
    -- until the holder goes or releases them.
    IF p_through IS NOT NULL AND locked > 0 THEN
        PERFORM stello_compact_segments(p_space, d.session_id, 16)
        FROM (
            SELECT g.session_id
            FROM record_segments g
            WHERE g.space_id = p_space
              AND g.session_id IN (SELECT x.session_id FROM record_segments x
                                   WHERE x.space_id = p_space AND x.holder_id = ANY (p_sessions)
                                     AND x.session_id <> ALL (p_sessions))
            GROUP BY g.session_id
            HAVING count(*) > 16
        ) d;
    END IF;

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
