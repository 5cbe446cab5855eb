-- stello_recount_tokens (migration 0006) becomes plpgsql, with the same effect.
--
-- Its `BEGIN ATOMIC` body recorded dependencies on the tables it reads, so
-- distributing them on Citus (stello.distribution) dropped it ("drop cascades
-- to function"); a plpgsql body is resolved when it runs. Each statement now
-- pins one space (`space_id = p_space`), which Citus routes to the space's
-- shard; a call for every space (p_space NULL, the maintenance form) recounts
-- them one space at a time (a data-modifying WITH over several shards is what
-- Citus cannot run). The result is the same as before on plain PostgreSQL.
CREATE OR REPLACE FUNCTION stello_recount_tokens(p_space uuid, p_session uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    each_space uuid;
BEGIN
    IF p_space IS NULL THEN
        FOR each_space IN
            SELECT DISTINCT s.space_id FROM sessions s WHERE p_session IS NULL OR s.id = p_session
        LOOP
            PERFORM stello_recount_tokens(each_space, p_session);
        END LOOP;
        RETURN;
    END IF;
    WITH counted AS (
        SELECT space_id, session_id, seq, stello_record_tokens(content, tool_calls) AS tokens
        FROM records
        WHERE space_id = p_space AND (p_session IS NULL OR session_id = p_session)
    ), summed AS (
        SELECT space_id, session_id, seq, tokens,
               sum(tokens) OVER (PARTITION BY space_id, session_id ORDER BY seq) AS cumulative
        FROM counted
    ), filled AS (
        UPDATE records r
        SET token_estimate = s.tokens, token_cumulative = s.cumulative
        FROM summed s
        WHERE r.space_id = p_space AND r.space_id = s.space_id
          AND r.session_id = s.session_id AND r.seq = s.seq
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
    WHERE s.space_id = p_space AND o.space_id = p_space AND s.id = o.id
      AND (p_session IS NULL OR o.id = p_session);
END;
$$;
