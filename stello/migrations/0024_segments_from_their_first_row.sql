-- A segment starts at a row (DESIGN §4.4; issue #34's lineage property test).
--
-- Before this release a Fork INHERIT of a source whose own records had been
-- trimmed (TrimRecords or Transact's trim) gave the child a segment over the
-- source's whole own range, from the source's cut + 1, trimmed seqs included:
-- a segment over seqs with no row, which `PARTS` promises never to list (reads
-- count a part's rows from its range, so a page of the child could skip its
-- later parts and come back short or empty). The fork now starts that segment at
-- the source's first own row still there (storage_service/records/lineage.py,
-- INHERIT). This converts what older forks wrote: such a segment is always its
-- session's first (a trim of a session's own rows has released every segment
-- of it below them), so it is moved up to its first row, or removed when no row
-- of its range is left (the child shows nothing of it either way). Rows copied
-- by a later compaction start at a row already. What every session shows is
-- unchanged.
--
-- One index probe per segment (its holder's first row in its range). Both
-- statements join the two tables on space_id, their distribution column on
-- Citus, so they run on the workers' shards as they do on one server.
UPDATE record_segments g
SET from_seq = f.first_seq
FROM (
    SELECT s.space_id, s.session_id, s.from_seq, x.seq AS first_seq
    FROM record_segments s
    CROSS JOIN LATERAL (
        SELECT r.seq FROM records r
        WHERE r.space_id = s.space_id AND r.session_id = s.holder_id
          AND r.seq >= s.from_seq AND r.seq <= s.to_seq
        ORDER BY r.seq
        LIMIT 1
    ) x
    WHERE x.seq > s.from_seq
) f
WHERE g.space_id = f.space_id AND g.session_id = f.session_id AND g.from_seq = f.from_seq;

DELETE FROM record_segments g
WHERE NOT EXISTS (SELECT FROM records r
                  WHERE r.space_id = g.space_id AND r.session_id = g.holder_id
                    AND r.seq >= g.from_seq AND r.seq <= g.to_seq);
