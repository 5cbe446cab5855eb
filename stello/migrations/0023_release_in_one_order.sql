-- One row-lock order for releases (DESIGN §4.4, issue #34's release against
-- release).
--
-- Migration 0022 made a release lock what it releases first (FOR UPDATE), then
-- the readers of those rows (FOR NO KEY UPDATE, in id order). Two releases whose
-- sets overlap in opposite roles still deadlocked: a trim held T and waited for
-- a reader R, while the release of U (read by T and R: the erasure job's, or a
-- trim of U) held R and waited for T; or a trim held a reader R of T and waited
-- for U, a reader of T being erased, while the erasure of U held U and waited
-- for R.
--
-- The order now:
-- - A Fork INHERIT key-shares the holders of its source's segments in id order,
--   then locks its source (FOR SHARE; NO KEY UPDATE to compact it).
-- - A trim (TrimRecords, Transact's trim_records) locks the trimmed session
--   together with every session reading rows it holds, in ONE statement in id
--   order, all FOR NO KEY UPDATE (a trim changes no key), skipping sessions
--   being erased, first in its transaction (storage's LOCK_FOR_TRIM). Its first
--   passes SKIP LOCKED rows and, when one was skipped, roll back to a savepoint
--   and try again a little later: a trim that waits for no lock while it holds
--   one closes no cycle. The later passes wait, in id order; a reader that a
--   fork committed meanwhile would come out of order, so the pass is taken
--   again with it. Once the trimmed session and its readers are locked no
--   reader can be added (a fork locks its source FOR SHARE), so this function
--   finds them all locked.
-- - The erasure job locks its batch FOR UPDATE (it deletes it) in id order,
--   then its readers FOR NO KEY UPDATE in id order, both SKIP LOCKED with a
--   check that no row it needs was skipped: when one was, it rolls back and
--   tries again a little later, so it never waits while it holds a lock either
--   (its last try waits). (This file's first version took them NOWAIT, which
--   logged an ERROR per conflict; tree_service.sql since, issue #34.) The batch
--   must come first, not in one id order with its readers: a fork holding a
--   batch session's key share (a holder of its source's rows) and waiting for
--   its source (a reader the release took) would wait for the release, whose
--   FOR UPDATE waits for that key share. The sweep claims SKIP LOCKED and, since
--   issue #34, locks its claimed sessions' readers as the erasure job does (it
--   kept 0022's order here: a sweep holding a claimed session could wait for a
--   reader a trim held while the trim waited for the claimed session).
-- - A CommitSession locks the session and its provisional parent in one pass
--   in id order (tree_service.sql LOCK_FOR_COMMIT, since issue #34; child then
--   parent, it could close a cycle with a trim holding both), and a Transact
--   that trims and checks an insight or memory version takes that session's
--   FOR UPDATE in the trim's pass (storage's TRIM_SET_IDS and LOCK_IDS; it took
--   it after the pass, after higher ids).
--
-- Why no cycle is left between releases. A key share waits only for a FOR
-- UPDATE (the erasure's batch, taken before any reader), and a fork's lock of
-- its source is its last. Two trims that wait lock in one order. A trim locks
-- no session being erased and the erasure's FOR UPDATE only those; in the
-- reader step both go up by id. And a release that takes its locks without
-- waiting holds nothing while it waits (it backs off).
--
-- So, for a trim (p_through not NULL), a session being erased is no reader: its
-- segments stay as they are (what it read of the trimmed rows goes; no read
-- shows a hidden session, and its own release drops its segments). The erasure
-- still moves rows to any reader, hidden ones included. Otherwise the function
-- is migration 0022's.
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
              AND (p_through IS NULL OR s.provisional_until IS DISTINCT FROM 'infinity')
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
