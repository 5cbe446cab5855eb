-- Bounded turns (DESIGN §4.3): what a turn needs is found without reading
-- the history.
--
-- 1. Token accounting. Each record keeps its estimate and the cumulative
--    estimate of its session through it, and each session the cumulative
--    estimate through its last record, so the estimate of the records after
--    any seq is one subtraction (`token_total` minus the cumulative at the
--    cut) and the newest records within a budget are one index probe on
--    `records_tokens`. The estimate is STELLO-SPEC §4.7's ceil(length / 4),
--    length in code points, tool-call names and arguments included (DESIGN
--    §5.14): `stello_record_tokens` is its only SQL form; storage's append
--    calls it, and `stello.tokens.record_tokens` is the same rule in Python
--    (tests/storage/test_tokens.py checks that they agree).
CREATE FUNCTION stello_record_tokens(content text, tool_calls jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((length(content)
         + COALESCE((SELECT sum(length(c ->> 'name') + length(c ->> 'arguments_json'))
                     FROM jsonb_array_elements(tool_calls) AS c), 0)
         + 3) / 4)::integer;

ALTER TABLE records
    ADD COLUMN token_estimate integer,
    ADD COLUMN token_cumulative bigint;
ALTER TABLE sessions ADD COLUMN token_total bigint NOT NULL DEFAULT 0;

-- Recounts the token columns of the records of one session, of one space
-- (p_session NULL) or of every space (both NULL), and the totals of their
-- sessions: one set-based statement. The cumulative starts at a session's
-- oldest remaining record (trimmed ones no longer count; only differences
-- are ever used). The migration below fills existing rows with it, and
-- seeders that COPY records (tests, bench/) call it afterwards, so their
-- rows hold exactly what the migration and the append write.
CREATE FUNCTION stello_recount_tokens(p_space uuid, p_session uuid) RETURNS void
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    WITH counted AS (
        SELECT space_id, session_id, seq, stello_record_tokens(content, tool_calls) AS tokens
        FROM records
        WHERE (p_space IS NULL OR space_id = p_space)
          AND (p_session IS NULL OR session_id = p_session)
    ), summed AS (
        SELECT space_id, session_id, seq, tokens,
               sum(tokens) OVER (PARTITION BY space_id, session_id ORDER BY seq) AS cumulative
        FROM counted
    ), filled AS (
        UPDATE records r
        SET token_estimate = s.tokens, token_cumulative = s.cumulative
        FROM summed s
        WHERE r.space_id = s.space_id AND r.session_id = s.session_id AND r.seq = s.seq
        RETURNING r.space_id, r.session_id, r.token_cumulative
    ), totals AS (
        SELECT space_id, session_id, max(token_cumulative) AS total
        FROM filled
        GROUP BY space_id, session_id
    )
    UPDATE sessions s
    SET token_total = COALESCE(t.total, 0)
    FROM sessions o
    LEFT JOIN totals t ON t.space_id = o.space_id AND t.session_id = o.id
    WHERE s.space_id = o.space_id AND s.id = o.id
      AND (p_space IS NULL OR o.space_id = p_space)
      AND (p_session IS NULL OR o.id = p_session);
END;

SELECT stello_recount_tokens(NULL, NULL);

-- No default: an insert that does not count its tokens fails.
ALTER TABLE records
    ALTER COLUMN token_estimate SET NOT NULL,
    ALTER COLUMN token_cumulative SET NOT NULL;

-- The newest records within a budget: the first record whose cumulative
-- reaches (total - budget), one probe (the cumulative grows with seq).
CREATE INDEX records_tokens ON records (space_id, session_id, token_cumulative);

-- 2. Summaries are kept by the seq they cover (DESIGN §4.3, §5.11), not one
--    row per session: a fork from a past point starts from the newest
--    summary at or below its cut, and a background fold replaces a lossy
--    summary (one that names older records by count only) by a complete one
--    at the same seq. The newest row is the session's compression cache.
ALTER TABLE compression_caches DROP CONSTRAINT compression_caches_pkey;
ALTER TABLE compression_caches ADD PRIMARY KEY (space_id, session_id, covered_until_seq);
ALTER TABLE compression_caches ADD COLUMN lossy boolean NOT NULL DEFAULT false;

-- 3. The memory records the last seq it covers (DESIGN §4.3 "Consolidate
--    folds too"): the next consolidation reads the records after it only.
--    NULL: not known (a memory written before this migration).
ALTER TABLE session_slots ADD COLUMN memory_covered_until_seq bigint;
