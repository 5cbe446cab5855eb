-- The append, the fork's lineage and prompt copies, idempotency's writes and the release's
-- copy to its heirs as plain statements (docs/scaling.md "What co-location gives"), the last
-- request statements Citus planned recursively.
--
-- Each was one statement whose INSERTs were data-modifying CTEs. Citus routes only SELECT,
-- UPDATE and DELETE CTEs to one worker: an INSERT in a CTE is planned recursively, each
-- CTE's result sent as an intermediate result through the coordinator to the workers, so a
-- space's Send, Fork or keyed write needed more than its own worker and cost extra round
-- trips. Each function does the same work, in the same order of locks, in statements that
-- Citus routes whole to the space's worker (every distributed table pinned by `p_space`, no
-- INSERT in a CTE), and the service still sends one statement, in the same transaction as
-- before. On plain PostgreSQL they run as any function.
--
-- On Citus (`stello.distribution.FUNCTIONS`), `stello_append_records` is distributed by
-- `p_space`: an append that is its own transaction (AppendRecords, the event written in it)
-- is delegated whole to the space's worker, one round trip. Called inside a transaction
-- (a Transact), and the others always, they run on the coordinator, each statement routed.

-- Append records to session $2 of space $1, one per element of the arrays (non-empty, of
-- one length; `p_calls` and `p_metadata` JSON text), with the next seqs and their token
-- estimates (migration 0006), under the session's row lock (the UPDATE, held to the end of
-- the transaction: concurrent appends queue on it and get contiguous ranges). No row when
-- the session is absent (or being erased). `p_event`: the statement is its own transaction
-- and writes its `records_appended` event itself, taking the space's next position (its
-- `space_positions` row stays locked until the commit), unless the session is provisional;
-- else the caller's outbox writes it (`stello.events.Outbox`). Answers each record's seq and
-- created_at.
CREATE FUNCTION stello_append_records(
    p_space uuid, p_session uuid, p_roles text[], p_contents text[], p_calls text[],
    p_call_ids text[], p_created timestamptz[], p_metadata text[], p_event boolean
)
RETURNS TABLE (seq bigint, created_at timestamptz)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_count        integer := cardinality(p_roles);
    v_tokens       integer[];
    v_added        bigint;
    v_base         bigint;
    v_base_tokens  bigint;
    v_visible      boolean;
    v_position     bigint;
BEGIN
    SELECT array_agg(stello_record_tokens(r.content, r.calls::jsonb) ORDER BY r.ord),
           COALESCE(sum(stello_record_tokens(r.content, r.calls::jsonb)), 0)
    INTO v_tokens, v_added
    FROM unnest(p_contents, p_calls) WITH ORDINALITY AS r (content, calls, ord);
    UPDATE sessions s
    SET last_seq = s.last_seq + v_count, token_total = s.token_total + v_added
    WHERE s.space_id = p_space AND s.id = p_session
      AND s.provisional_until IS DISTINCT FROM 'infinity'
    RETURNING s.last_seq - v_count, s.token_total - v_added, s.provisional_until IS NULL
    INTO v_base, v_base_tokens, v_visible;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO records (space_id, session_id, seq, role, content, tool_calls, tool_call_id,
                         created_at, metadata, token_estimate, token_cumulative)
    SELECT p_space, p_session, v_base + r.ord, r.role, r.content, r.calls::jsonb, r.call_id,
           COALESCE(r.created, now()), r.metadata::jsonb, v_tokens[r.ord],
           v_base_tokens + sum(v_tokens[r.ord]) OVER (ORDER BY r.ord)
    FROM unnest(p_roles, p_contents, p_calls, p_call_ids, p_created, p_metadata)
         WITH ORDINALITY AS r (role, content, calls, call_id, created, metadata, ord);
    IF p_event AND v_visible THEN
        INSERT INTO space_positions AS p (space_id, last_position)
        VALUES (p_space, 1)
        ON CONFLICT (space_id) DO UPDATE SET last_position = p.last_position + 1
        RETURNING p.last_position INTO v_position;
        INSERT INTO space_events (space_id, position, kind, session_id, first_seq, last_seq)
        VALUES (p_space, v_position, 'records_appended', p_session, v_base + 1,
                v_base + v_count);
    END IF;
    RETURN QUERY
    SELECT v_base + r.ord, COALESCE(r.created, now())
    FROM unnest(p_created) WITH ORDINALITY AS r (created, ord);
END
$$;

-- Give new session $2 of space $1 the records of its source $3 through the cut $4 by
-- reference (storage_service.records.lineage.InheritRecordsOp; the caller holds the
-- source's and its holders' row locks): its lineage, its segments (the source's cut at the
-- cut, plus the source's own part from its first own row still there, unless the source's
-- last segment already is its own rows just below them, `p_own_after`, which is then
-- extended to the cut), and the source's newest summary at or below the cut. $5 is the
-- cumulative estimate at the cut. The session must be new: no record ever appended
-- (last_seq 0) and no lineage; else nothing is written and `made` is 0. `segments`: how
-- many segment rows it wrote.
CREATE FUNCTION stello_inherit_records(
    p_space uuid, p_child uuid, p_source uuid, p_cut bigint, p_cumulative bigint,
    p_own_after bigint
)
RETURNS TABLE (made integer, segments integer)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_own_last   boolean;
    v_own_first  bigint;
    v_added      integer;
    v_summary    text;
    v_covered    bigint;
    v_lossy      boolean;
BEGIN
    made := 0;
    segments := 0;
    UPDATE sessions s SET last_seq = p_cut, token_total = p_cumulative
    WHERE s.space_id = p_space AND s.id = p_child AND s.last_seq = 0
      AND s.provisional_until IS DISTINCT FROM 'infinity'
      AND NOT EXISTS (SELECT FROM session_lineages l
                      WHERE l.space_id = p_space AND l.session_id = p_child);
    IF NOT FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    made := 1;
    INSERT INTO session_lineages (space_id, session_id, source_id, until_seq)
    VALUES (p_space, p_child, p_source, p_cut);
    -- The target's space_id is the source rows' own (not the parameter), as Citus needs to
    -- push an INSERT ... SELECT down to the shard.
    INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
    SELECT g.space_id, p_child, g.from_seq,
           CASE WHEN g.holder_id = p_source AND g.to_seq = p_own_after THEN p_cut
                ELSE LEAST(g.to_seq, p_cut) END,
           g.holder_id
    FROM record_segments g
    WHERE g.space_id = p_space AND g.session_id = p_source AND g.from_seq <= p_cut;
    GET DIAGNOSTICS segments = ROW_COUNT;
    SELECT EXISTS (SELECT FROM record_segments g
                   WHERE g.space_id = p_space AND g.session_id = p_source
                     AND g.holder_id = p_source AND g.to_seq = p_own_after),
           (SELECT min(r.seq) FROM records r
            WHERE r.space_id = p_space AND r.session_id = p_source
              AND r.seq > p_own_after AND r.seq <= p_cut)
    INTO v_own_last, v_own_first;
    IF v_own_first IS NOT NULL AND NOT v_own_last THEN
        INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
        VALUES (p_space, p_child, v_own_first, p_cut, p_source);
        segments := segments + 1;
    END IF;
    IF p_cut > 0 THEN
        SELECT c.summary, c.covered_until_seq, c.lossy INTO v_summary, v_covered, v_lossy
        FROM compression_caches c
        WHERE c.space_id = p_space AND c.session_id = p_source AND c.covered_until_seq <= p_cut
        ORDER BY c.covered_until_seq DESC
        LIMIT 1;
        IF FOUND THEN
            INSERT INTO compression_caches (space_id, session_id, summary, covered_until_seq,
                                            lossy)
            VALUES (p_space, p_child, v_summary, v_covered, v_lossy);
        END IF;
    END IF;
    RETURN NEXT;
END
$$;

-- CopySystemPromptOp: the visible source $3's non-empty system prompt onto session $2 of
-- space $1 (share-locked first, as PUT_SLOT locks it: storage_service.slots.repository),
-- written as PUT_SLOT writes it; whether each was found and whether it copied.
CREATE FUNCTION stello_copy_system_prompt(p_space uuid, p_target uuid, p_source uuid)
RETURNS TABLE (target_found boolean, source_found boolean, copied boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_prompt  text;
BEGIN
    PERFORM FROM sessions s
    WHERE s.space_id = p_space AND s.id = p_target
      AND s.provisional_until IS DISTINCT FROM 'infinity'
    FOR KEY SHARE;
    target_found := FOUND;
    SELECT sl.system_prompt INTO v_prompt
    FROM sessions s
    LEFT JOIN session_slots sl ON sl.space_id = p_space AND sl.session_id = s.id
    WHERE s.space_id = p_space AND s.id = p_source AND s.provisional_until IS NULL;
    source_found := FOUND;
    copied := target_found AND source_found AND v_prompt <> '';
    IF copied THEN
        INSERT INTO session_slots (space_id, session_id, system_prompt)
        VALUES (p_space, p_target, v_prompt)
        ON CONFLICT (space_id, session_id)
        DO UPDATE SET system_prompt = EXCLUDED.system_prompt, updated_at = EXCLUDED.updated_at;
    END IF;
    RETURN NEXT;
END
$$;

-- The sessions `p_sessions` linked to key ($2, $3) of space $1, and no other (the links of
-- a response: stello.idempotency).
CREATE FUNCTION stello_link_key(
    p_space uuid, p_scope text, p_request_id text, p_sessions uuid[]
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    DELETE FROM idempotency_key_sessions l
    WHERE l.space_id = p_space AND l.scope = p_scope AND l.request_id = p_request_id
      AND l.session_id <> ALL (p_sessions);
    IF COALESCE(cardinality(p_sessions), 0) > 0 THEN
        INSERT INTO idempotency_key_sessions (space_id, session_id, scope, request_id)
        SELECT p_space, l.id, p_scope, p_request_id FROM unnest(p_sessions) AS l (id)
        ON CONFLICT DO NOTHING;
    END IF;
END
$$;

-- stello.idempotency.remember: the response of this transaction's work under the key,
-- whatever the key held, linked to `p_sessions` only.
CREATE FUNCTION stello_remember(
    p_space uuid, p_scope text, p_request_id text, p_hash bytea, p_response bytea,
    p_sessions uuid[]
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    INSERT INTO idempotency_keys (space_id, scope, request_id, request_hash, response)
    VALUES (p_space, p_scope, p_request_id, p_hash, p_response)
    ON CONFLICT (space_id, scope, request_id) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
        created_at = EXCLUDED.created_at, erased = false;
    PERFORM stello_link_key(p_space, p_scope, p_request_id, p_sessions);
END
$$;

-- stello.idempotency.remember_new: the response under a new key, or one older than
-- `p_ttl_hours` (replaced), linked to `p_sessions` only; false, with nothing written, when
-- a live entry holds the key (waits for a concurrent insert of it). The time and the
-- comparison as in stello.idempotency.CLAIM (Citus runs only immutable functions in an
-- ON CONFLICT DO UPDATE).
CREATE FUNCTION stello_remember_new(
    p_space uuid, p_scope text, p_request_id text, p_hash bytea, p_response bytea,
    p_ttl_hours integer, p_sessions uuid[]
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    INSERT INTO idempotency_keys AS k (space_id, scope, request_id, request_hash, response)
    VALUES (p_space, p_scope, p_request_id, p_hash, p_response)
    ON CONFLICT (space_id, scope, request_id) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
        created_at = EXCLUDED.created_at, erased = false
    WHERE k.created_at AT TIME ZONE 'UTC'
          <= EXCLUDED.created_at AT TIME ZONE 'UTC' - make_interval(hours => p_ttl_hours);
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM stello_link_key(p_space, p_scope, p_request_id, p_sessions);
    RETURN true;
END
$$;

-- The release's copy of the rows its heirs take over as a statement of its own
-- (stello_release_records, 0032 otherwise unchanged).
--
-- It was a data-modifying CTE (`moved`) of the statement that also wrote the readers'
-- segments past the cut: on the coordinator (a release inside a transaction: a trim, a
-- DeleteSubtree, the erasure job) Citus planned that statement recursively, through the
-- coordinator. Now the ranges are computed from the arrays first, then the copy and the
-- segments are two statements, each of the space's worker alone.

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
    copy_of   uuid[];
    copy_to   uuid[];
    copy_lo   bigint[];
    copy_hi   bigint[];
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

        -- The rows the heirs take over, copied from their holders: each holder's needed
        -- seqs as disjoint ranges (a range starts an island unless an earlier one, by
        -- from_seq, reaches it or the seq before it), computed from the arrays alone, then
        -- one range of `records_pkey` read per range.
        SELECT array_agg(i.holder), array_agg(i.heir), array_agg(i.lo), array_agg(i.hi)
        INTO copy_of, copy_to, copy_lo, copy_hi
        FROM (SELECT o.holder, o.heir, min(o.from_seq) AS lo, max(o.upto) AS hi
              FROM (SELECT s.holder, s.heir, s.from_seq, s.upto,
                           count(*) FILTER (WHERE s.starts) OVER (
                               PARTITION BY s.holder ORDER BY s.from_seq, s.upto
                               ROWS UNBOUNDED PRECEDING) AS island
                    FROM (SELECT n.holder, n.heir, n.from_seq, n.upto,
                                 n.from_seq > max(n.upto) OVER (
                                     PARTITION BY n.holder ORDER BY n.from_seq, n.upto
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) + 1
                                     AS starts
                          FROM unnest(movers, held_by, lows, highs, cuts, heirs_of)
                              AS n (reader, holder, from_seq, to_seq, upto, heir)) s) o
              GROUP BY o.holder, o.heir, o.island) i;

        INSERT INTO records (space_id, session_id, seq, role, content, tool_calls,
                             tool_call_id, created_at, metadata, token_estimate,
                             token_cumulative)
        SELECT DISTINCT ON (n.heir, r.seq)
               p_space, n.heir, r.seq, r.role, r.content, r.tool_calls, r.tool_call_id,
               r.created_at, r.metadata, r.token_estimate, r.token_cumulative
        FROM unnest(copy_of, copy_to, copy_lo, copy_hi) AS n (holder, heir, lo, hi)
        CROSS JOIN LATERAL (
            SELECT x.seq, x.role, x.content, x.tool_calls, x.tool_call_id, x.created_at,
                   x.metadata, x.token_estimate, x.token_cumulative
            FROM records x
            WHERE x.space_id = p_space AND x.session_id = n.holder
              AND x.seq >= n.lo AND x.seq <= n.hi
            OFFSET 0
        ) r
        ORDER BY n.heir, r.seq, n.holder
        ON CONFLICT DO NOTHING;

        -- The readers' segments past `through` stay with their holders.
        INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
        SELECT p_space, n.reader, n.upto + 1, n.to_seq, n.holder
        FROM unnest(movers, held_by, lows, highs, cuts, heirs_of)
            AS n (reader, holder, from_seq, to_seq, upto, heir)
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

-- On Citus: custom plans for every statement (migration 0033: a generic plan, made without
-- the space's value, cannot be pruned to its shard), and, on a schema distributed already,
-- each function on every node (the append by its space: a call outside a transaction is
-- delegated to the space's worker), as `stello.distribution.distribute` does.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    -- Replaced above: CREATE OR REPLACE resets a function's settings (0033 set it).
    ALTER FUNCTION stello_release_records(uuid, uuid[], bigint)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_append_records(uuid, uuid, text[], text[], text[], text[],
                                         timestamptz[], text[], boolean)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_inherit_records(uuid, uuid, uuid, bigint, bigint, bigint)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_copy_system_prompt(uuid, uuid, uuid)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_link_key(uuid, text, text, uuid[])
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_remember(uuid, text, text, bytea, bytea, uuid[])
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_remember_new(uuid, text, text, bytea, bytea, integer, uuid[])
        SET plan_cache_mode = force_custom_plan;
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_function(
          'stello_append_records(uuid, uuid, text[], text[], text[], text[], timestamptz[], '
          'text[], boolean)', 'p_space', colocate_with => 'sessions');
      PERFORM create_distributed_function(
          'stello_inherit_records(uuid, uuid, uuid, bigint, bigint, bigint)');
      PERFORM create_distributed_function('stello_copy_system_prompt(uuid, uuid, uuid)');
      PERFORM create_distributed_function('stello_link_key(uuid, text, text, uuid[])');
      PERFORM create_distributed_function(
          'stello_remember(uuid, text, text, bytea, bytea, uuid[])');
      PERFORM create_distributed_function(
          'stello_remember_new(uuid, text, text, bytea, bytea, integer, uuid[])');
    END IF;
  END IF;
END $$;
