-- A release with readers probes per row too, whatever plan its statements get
-- (DESIGN §4.4; 0029 did so for the release's locks and its deletions).
--
-- The statements of `stello_release_records` that run only when surviving
-- forks read the released rows (the heirs' move, and a trim's compaction of
-- the readers it splits) were planned from the statistics of `record_segments`
-- without the released session (generically, as a long-lived connection's
-- plans are; custom plans too, where a join's side was a CTE): in a space
-- whose segments mostly belong to a few sources forked thousands of times, a
-- holder looks like hundreds of readers. The move then read every record of
-- the space in a hash join, the readers' update every segment of it, and a
-- trim's choice of the readers to compact became a hash semi-join over the
-- space's `record_segments` and `sessions`. A trim of 20 records that 50
-- forks read, in a space of 11,000 sessions (two sources forked 4,000 times
-- each), read 22,927 tuples of `sessions`, 17,788 of `record_segments` and
-- 9,656 of `records` under `plan_cache_mode = force_generic_plan`, ten times
-- that in a space ten times bigger (220,929 and 161,886); the erasure of that
-- source after DeleteSubtree 11,600, 9,263 and 9,394, then 110,601 and 81,412
-- (tests/storage/records/test_release_reads.py). The move also read each
-- needed row once per reader that needs it, under any plan.
--
-- Now the readers' segments are found as the release's locks find them: one
-- range of `record_segments_holder` per released session (LATERAL, OFFSET 0),
-- each reader's visibility one primary-key probe of `sessions` (a scalar
-- subquery), and read first, with their heirs, into arrays. Each holder's
-- needed rows are the union of its readers' ranges, merged into disjoint
-- ranges, and each range is one range of `records_pkey` (LATERAL, OFFSET 0):
-- a needed row is read once. The readers' segments are updated by primary key
-- (the readers named), without a join (joined with a CTE of them, the planner
-- weighed the segments found against a scan of the space's and took the scan;
-- one UPDATE per segment in a loop crashed Citus 13.2's worker). A trim's
-- readers to compact are those same ranges of `record_segments_holder`, each
-- counting its own segments (at most SEGMENT_CAP + 1) in a scalar subquery.
-- Nothing else changes.

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
