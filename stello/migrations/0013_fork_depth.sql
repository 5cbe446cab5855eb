-- Fork chains at any depth (DESIGN §4.4, issue #34): a session has at most 16
-- segments (`SEGMENT_CAP`), however long the chain of forks of forks it comes from.
--
-- Before, a Fork INHERIT wrote its source's segments plus one, so a fork at
-- depth d wrote d rows and every read of its records probed d index ranges.
-- Now a list that would pass the cap is compacted: the rows of some adjacent
-- segments are copied, verbatim (every column: seq, role, content, tool
-- calls, created_at, metadata, token estimate and cumulative), into the
-- session itself, and those segments become one segment it holds. A row a
-- session holds at a seq of its view is the record of that seq on its line,
-- as for rows an heir took over (migration 0009), so every release keeps
-- working; copies only make a record's row appear at more than one holder.
--
-- Which segments: first adjacent ones of one holder merge for nothing; then,
-- until the cap holds, the newest adjacent pair whose older segment is not
-- larger than its newer one (the sizes then fall geometrically towards the
-- newest, as in a binary counter), the cheapest such pair (fewest rows
-- copied), else the cheapest pair. In a chain where each session adds r
-- records this copies O(r log d) rows per fork on average (measured: 6.5
-- rows per fork at depth 2,000 with r = 1); a single fork copies at most the
-- two segments it merges. Seqs of a view are contiguous (appends number them
-- in order, trims cut a prefix), so a segment's size is its seq range.

-- Compacts the segments of session `p_session` of space `p_space` to at most
-- `p_max`; the rows copied. Called by a Fork INHERIT whose children would
-- pass the cap, on its source (locked FOR NO KEY UPDATE: once for all its
-- forks), or on the child when the source's list grew meanwhile; by a trim
-- that split a reader's segment; and by this migration. The view does not
-- change: the copies are the rows it showed, and they show as inherited.
CREATE FUNCTION stello_compact_segments(p_space uuid, p_session uuid, p_max integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    holders   uuid[];
    froms     bigint[];
    tos       bigint[];
    copy_h    uuid[] := '{}';
    copy_lo   bigint[] := '{}';
    copy_hi   bigint[] := '{}';
    n         integer;
    i         integer;
    best      integer;
    best_key  bigint[];
    cand      bigint[];
    changed   boolean := false;
    copied    bigint := 0;
BEGIN
    SELECT array_agg(holder_id ORDER BY from_seq), array_agg(from_seq ORDER BY from_seq),
           array_agg(to_seq ORDER BY from_seq)
    INTO holders, froms, tos
    FROM record_segments
    WHERE space_id = p_space AND session_id = p_session;
    n := COALESCE(array_length(holders, 1), 0);
    LOOP
        -- Adjacent segments of one holder are one range of its rows.
        i := 1;
        WHILE i < n LOOP
            IF holders[i] = holders[i + 1] AND tos[i] + 1 = froms[i + 1] THEN
                tos[i] := tos[i + 1];
                holders := holders[1:i] || holders[i + 2:n];
                froms := froms[1:i] || froms[i + 2:n];
                tos := tos[1:i] || tos[i + 2:n];
                n := n - 1;
                changed := true;
            ELSE
                i := i + 1;
            END IF;
        END LOOP;
        EXIT WHEN n <= p_max;
        best := NULL;
        FOR i IN 1 .. n - 1 LOOP
            cand := ARRAY[
                CASE WHEN tos[i] - froms[i] <= tos[i + 1] - froms[i + 1] THEN 0 ELSE 1 END,
                CASE WHEN holders[i] = p_session THEN 0 ELSE tos[i] - froms[i] + 1 END
                + CASE WHEN holders[i + 1] = p_session THEN 0 ELSE tos[i + 1] - froms[i + 1] + 1 END,
                -i];
            IF best IS NULL OR cand < best_key THEN
                best := i;
                best_key := cand;
            END IF;
        END LOOP;
        FOR i IN best .. best + 1 LOOP
            IF holders[i] <> p_session THEN
                copy_h := copy_h || holders[i];
                copy_lo := copy_lo || froms[i];
                copy_hi := copy_hi || tos[i];
            END IF;
        END LOOP;
        holders[best] := p_session;
        tos[best] := tos[best + 1];
        holders := holders[1:best] || holders[best + 2:n];
        froms := froms[1:best] || froms[best + 2:n];
        tos := tos[1:best] || tos[best + 2:n];
        n := n - 1;
        changed := true;
    END LOOP;
    IF NOT changed THEN
        RETURN 0;
    END IF;
    IF array_length(copy_h, 1) > 0 THEN
        INSERT INTO records (space_id, session_id, seq, role, content, tool_calls, tool_call_id,
                             created_at, metadata, token_estimate, token_cumulative)
        SELECT p_space, p_session, r.seq, r.role, r.content, r.tool_calls, r.tool_call_id,
               r.created_at, r.metadata, r.token_estimate, r.token_cumulative
        FROM unnest(copy_h, copy_lo, copy_hi) AS c (holder, lo, hi)
        JOIN records r ON r.space_id = p_space AND r.session_id = c.holder
                      AND r.seq >= c.lo AND r.seq <= c.hi;
        GET DIAGNOSTICS copied = ROW_COUNT;
    END IF;
    DELETE FROM record_segments WHERE space_id = p_space AND session_id = p_session;
    INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
    SELECT p_space, p_session, s.f, s.t, s.h
    FROM unnest(holders, froms, tos) AS s (h, f, t);
    RETURN copied;
END;
$$;

-- The release of migration 0009, with copies and the cap: a row moves to its heir only
-- when the heir has no row at that seq yet (a copy of the same record), and
-- once per (heir, seq) when two released holders hold the same record; the
-- released holders' rows go afterwards as before. The move is an INSERT of
-- the row under the heir (verbatim, every column) and the DELETE of the
-- released rows that already follows.
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

-- Existing lists past the cap are compacted, space by space, session by
-- session (each call's statements pin the space). A schema already
-- distributed gets the new function on every node first.
-- The cap (16) is `SEGMENT_CAP` of storage_service.records.lineage.
DO $$
DECLARE
    spaces    uuid[];
    ids       uuid[];
BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_function('stello_compact_segments(uuid, uuid, integer)',
                                          'p_space', colocate_with => 'sessions');
    END IF;
  END IF;
  SELECT array_agg(d.space_id), array_agg(d.session_id) INTO spaces, ids
  FROM (SELECT space_id, session_id FROM record_segments
        GROUP BY space_id, session_id HAVING count(*) > 16) d;
  FOR i IN 1 .. COALESCE(array_length(spaces, 1), 0) LOOP
      PERFORM stello_compact_segments(spaces[i], ids[i], 16);
  END LOOP;
END $$;
