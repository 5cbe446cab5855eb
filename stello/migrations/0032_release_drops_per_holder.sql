-- A release finds the rows no one reads any more per holder, whatever plan
-- its deletion gets (DESIGN §4.4; 0029, 0030 did so for its other statements).
--
-- The released sessions' segments of rows that their holders hold as heirs
-- (`dropped`: up to the holder's own lineage cut) were deleted row by row,
-- each row checked by a `LIMIT 1` probe of its holder's segments for another
-- reader that still reads it. The planner takes `holder_id = <the holder>` for
-- the table's rows over its distinct holders and, with the LIMIT, weighed a
-- scan of the table that stops at the first segment found against the range
-- of `record_segments_holder`: when its statistics say few holders (ten, in a
-- space whose segments mostly belong to a few sources), and the index led by
-- `space_id` does not follow the table's order (a database that tenants
-- share), it took the scan, under custom and generic plans alike. A row that
-- no one else reads has no such segment: each was a read of every segment of
-- the table. The erasure of a reader of an heir (40 of its rows checked, 20
-- of them read by no one else) read 340,685 tuples of `record_segments`, and
-- 3,220,785 in a space ten times bigger (tests/storage/records/
-- test_release_reads.py), under both plans; its rows times the table, at
-- worst. Now 16 at both sizes.
--
-- Now the rows to delete are found per holder, as the release's other
-- statements find theirs, and read first into arrays: the released ranges of
-- a holder (merged: `range_agg`) less its own view of them (its own segments,
-- a probe by key, at most the segment cap), then, only if some are left (rows
-- an heir holds for others beyond its own view), less its other readers'
-- segments: the holder's one range of `record_segments_holder` (LATERAL,
-- OFFSET 0), read once, not once per row (read for every holder, it read 538
-- tuples of `record_segments` in a trim at the end of a chain of 2,000 forks,
-- whose compacted holder's own segment covers the rows: test_fork_depth_reads).
-- What is left, as disjoint ranges,
-- is deleted by a join with the arrays (as 0030's update of the readers'
-- segments), one range of `records_pkey` each: the deletion reads the rows it
-- deletes, no longer each row it checked. A holder that holds none of the
-- released rows as an heir (a source, a fork's own records: `hi` below `lo`)
-- is not read at all, as before. Nothing else changes. Multiranges are
-- PostgreSQL 14's (`range_agg`, `unnest`): PostgreSQL 15, 18 and Citus alike.

CREATE OR REPLACE FUNCTION stello_release_records(p_space uuid, p_sessions uuid[], p_through bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    through   bigint := COALESCE(p_through, 9223372036854775807);
    seen      integer := -1;
    locked    integer;
    movers    uuid[];
    held_by   uuid[];
    lows      bigint[];
    highs     bigint[];
    cuts      bigint[];
    heirs_of  uuid[];
    gone_of   uuid[];
    gone_lo   bigint[];
    gone_hi   bigint[];
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
        -- The readers' segments of the released rows, each with its holder's heir: read
        -- first, and moved by the statements below.
        WITH needs AS (
            SELECT g.session_id AS reader, g.holder_id AS holder, g.from_seq, g.to_seq,
                   LEAST(g.to_seq, through) AS upto, g.provisional_until IS NULL AS visible
            FROM (SELECT DISTINCT u.id FROM unnest(p_sessions) AS u (id)) h
            CROSS JOIN LATERAL (
                SELECT x.session_id, x.holder_id, x.from_seq, x.to_seq,
                       (SELECT s.provisional_until FROM sessions s
                        WHERE s.space_id = p_space AND s.id = x.session_id) AS provisional_until
                FROM record_segments x
                WHERE x.space_id = p_space AND x.holder_id = h.id
                  AND x.from_seq <= through AND x.session_id <> ALL (p_sessions)
                OFFSET 0
            ) g
            WHERE p_through IS NULL OR g.provisional_until IS DISTINCT FROM 'infinity'
        ), heirs AS (
            SELECT DISTINCT ON (n.holder) n.holder, n.reader AS heir
            FROM needs n
            ORDER BY n.holder, n.upto DESC, n.visible DESC, n.reader
        )
        SELECT array_agg(n.reader), array_agg(n.holder), array_agg(n.from_seq),
               array_agg(n.to_seq), array_agg(n.upto), array_agg(h.heir)
        INTO movers, held_by, lows, highs, cuts, heirs_of
        FROM needs n
        JOIN heirs h ON h.holder = n.holder;

        WITH needs AS (
            SELECT * FROM unnest(movers, held_by, lows, highs, cuts, heirs_of)
                AS n (reader, holder, from_seq, to_seq, upto, heir)
        ), ranges AS (
            -- Each holder's needed seqs as disjoint ranges: a range starts an island
            -- unless an earlier one (by from_seq) reaches it or the seq before it.
            SELECT i.holder, i.heir, min(i.from_seq) AS lo, max(i.upto) AS hi
            FROM (SELECT o.holder, o.heir, o.from_seq, o.upto,
                         count(*) FILTER (WHERE o.starts) OVER (
                             PARTITION BY o.holder ORDER BY o.from_seq, o.upto
                             ROWS UNBOUNDED PRECEDING) AS island
                  FROM (SELECT n.holder, n.heir, n.from_seq, n.upto,
                               n.from_seq > max(n.upto) OVER (
                                   PARTITION BY n.holder ORDER BY n.from_seq, n.upto
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) + 1 AS starts
                        FROM needs n) o) i
            GROUP BY i.holder, i.heir, i.island
        ), moved AS (
            INSERT INTO records (space_id, session_id, seq, role, content, tool_calls,
                                 tool_call_id, created_at, metadata, token_estimate,
                                 token_cumulative)
            SELECT DISTINCT ON (n.heir, r.seq)
                   p_space, n.heir, r.seq, r.role, r.content, r.tool_calls, r.tool_call_id,
                   r.created_at, r.metadata, r.token_estimate, r.token_cumulative
            FROM ranges n
            CROSS JOIN LATERAL (
                SELECT x.seq, x.role, x.content, x.tool_calls, x.tool_call_id, x.created_at,
                       x.metadata, x.token_estimate, x.token_cumulative
                FROM records x
                WHERE x.space_id = p_space AND x.session_id = n.holder
                  AND x.seq >= n.lo AND x.seq <= n.hi
                OFFSET 0
            ) r
            ORDER BY n.heir, r.seq, n.holder
            ON CONFLICT DO NOTHING
        )
        INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
        SELECT p_space, n.reader, n.upto + 1, n.to_seq, n.holder
        FROM needs n
        WHERE n.to_seq > through;

        -- Then the readers' segments of the released rows go to the heirs, cut at
        -- `through` (the split above added the part past it, from `through` + 1): each
        -- reader's segments by its primary key, in one statement without a join, so
        -- no plan of it scans the space's segments to match them.
        UPDATE record_segments g
        SET holder_id = (SELECT h.heir FROM unnest(held_by, heirs_of) AS h (holder, heir)
                         WHERE h.holder = g.holder_id LIMIT 1),
            to_seq = LEAST(g.to_seq, through)
        WHERE g.space_id = p_space AND g.session_id = ANY (movers)
          AND g.from_seq <= through AND g.holder_id = ANY (p_sessions);
    END IF;

    -- A trim splits a reader's segment that crosses `p_through` (its part above
    -- stays with the holder): a reader now past the cap is compacted (it is
    -- locked above; a session being erased is no reader of a trim). Rows it
    -- then copies from a holder stay with that holder until the holder goes or
    -- releases them.
    IF p_through IS NOT NULL AND locked > 0 THEN
        PERFORM stello_compact_segments(p_space, d.id, 16)
        FROM (SELECT DISTINCT r.session_id AS id
              FROM unnest(p_sessions) AS h (id)
              CROSS JOIN LATERAL (
                  SELECT x.session_id FROM record_segments x
                  WHERE x.space_id = p_space AND x.holder_id = h.id
                    AND x.session_id <> ALL (p_sessions)
                  OFFSET 0
              ) r
              ORDER BY 1) d
        WHERE (SELECT s.provisional_until FROM sessions s
               WHERE s.space_id = p_space AND s.id = d.id) IS DISTINCT FROM 'infinity'
          AND (SELECT count(*) FROM record_segments g
               WHERE g.space_id = p_space AND g.session_id = d.id) > 16;
    END IF;

    -- The rows that the released sessions read from a holder as its heir (or a
    -- compaction's copy) and that no other session reads: the released ranges
    -- less the holder's own view of them (its own segments, by key), then, if
    -- any are left, less its other readers' segments (the holder's one range of
    -- `record_segments_holder`); read first, then deleted by range.
    WITH dropped AS MATERIALIZED (
        SELECT g.holder_id AS holder, g.from_seq AS lo,
               LEAST(g.to_seq, through,
                     COALESCE((SELECT l.until_seq FROM session_lineages l
                               WHERE l.space_id = p_space AND l.session_id = g.holder_id),
                              0)) AS hi
        FROM record_segments g
        WHERE g.space_id = p_space AND g.session_id = ANY (p_sessions)
          AND g.from_seq <= through AND g.holder_id <> ALL (p_sessions)
    ), wanted AS MATERIALIZED (
        SELECT d.holder, max(d.hi) AS top, range_agg(int8range(d.lo, d.hi, '[]')) AS seqs
        FROM dropped d
        WHERE d.lo <= d.hi
        GROUP BY d.holder
    ), unread AS MATERIALIZED (
        SELECT w.holder, w.top, w.seqs - COALESCE(o.seqs, '{}'::int8multirange) AS seqs
        FROM wanted w
        CROSS JOIN LATERAL (
            SELECT range_agg(int8range(x.from_seq, LEAST(x.to_seq, w.top), '[]')) AS seqs
            FROM (SELECT g.from_seq, g.to_seq FROM record_segments g
                  WHERE g.space_id = p_space AND g.session_id = w.holder
                    AND g.holder_id = w.holder
                  OFFSET 0) x
            WHERE x.from_seq <= w.top
        ) o
    )
    SELECT array_agg(u.holder), array_agg(lower(u.seqs)), array_agg(upper(u.seqs) - 1)
    INTO gone_of, gone_lo, gone_hi
    FROM (
        SELECT n.holder, unnest(n.seqs - COALESCE(k.seqs, '{}'::int8multirange)) AS seqs
        FROM (SELECT * FROM unread WHERE NOT isempty(unread.seqs)) n
        CROSS JOIN LATERAL (
            SELECT range_agg(int8range(x.from_seq, LEAST(x.to_seq, n.top), '[]')) AS seqs
            FROM (SELECT g.from_seq, g.to_seq FROM record_segments g
                  WHERE g.space_id = p_space AND g.holder_id = n.holder
                    AND g.session_id <> ALL (p_sessions)
                  OFFSET 0) x
            WHERE x.from_seq <= n.top
        ) k
    ) u;

    IF gone_of IS NOT NULL THEN
        DELETE FROM records r
        USING unnest(gone_of, gone_lo, gone_hi) AS d (holder, lo, hi)
        WHERE r.space_id = p_space AND r.session_id = d.holder
          AND r.seq >= d.lo AND r.seq <= d.hi;
    END IF;

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
