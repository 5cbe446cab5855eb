-- CreateSession and the outbox's flush as functions of plain statements (docs/scaling.md
-- "What co-location gives"; explore5 F4).
--
-- Both were one statement whose INSERTs were data-modifying CTEs. Citus routes only
-- SELECT, UPDATE and DELETE CTEs to one worker: an INSERT in a CTE is planned
-- recursively, each CTE's result sent as an intermediate result to every worker, and
-- the rest inserted through the coordinator. Every CreateRoot, Fork and write
-- transaction of one space then needed every worker up, and cost more with each.
--
-- Each function does the same work in statements Citus routes whole to the space's
-- worker (every distributed table pinned by `p_space`, no INSERT in a CTE; the events'
-- rows are one INSERT ... SELECT from the arrays, which the coordinator copies into
-- the space's shard), and the service still sends one statement. On Citus they run on
-- the coordinator (`stello.distribution.FUNCTIONS`: on every node, not delegated, since
-- they are called inside transactions); on PostgreSQL as any function.

-- The session ($2) and its config ($7; NULL: none) of space $1: $3 the parent (NULL for
-- a root), $4 the label, $5 the source, $6 the provisioning TTL in seconds (NULL =
-- visible now). It inserts nothing when the parent or the source is not a visible
-- session of the space, and always answers one row that says which. A visible child
-- takes the next sibling index: its caller holds the parent's row lock
-- (tree_service.sql.LOCK_PARENT), so this snapshot sees every sibling committed before.
CREATE FUNCTION stello_create_session(
    p_space uuid, p_id uuid, p_parent uuid, p_label text, p_source uuid,
    p_ttl_s float8, p_config jsonb
)
RETURNS TABLE (
    id uuid, parent_id uuid, depth integer, sibling_index integer, label text,
    status text, source_session_id uuid, parent_found boolean, source_found boolean
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_root    uuid;
    v_depth   integer;
    v_index   integer;
BEGIN
    parent_found := p_parent IS NULL;
    source_found := p_source IS NULL;
    IF p_parent IS NOT NULL THEN
        SELECT s.root_id, s.depth + 1 INTO v_root, v_depth
        FROM sessions s
        WHERE s.space_id = p_space AND s.id = p_parent AND s.provisional_until IS NULL
        FOR KEY SHARE;
        parent_found := FOUND;
    END IF;
    IF p_source IS NOT NULL THEN
        PERFORM FROM sessions s
        WHERE s.space_id = p_space AND s.id = p_source AND s.provisional_until IS NULL;
        source_found := FOUND;
    END IF;
    IF NOT (parent_found AND source_found) THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_ttl_s IS NULL AND p_parent IS NOT NULL THEN
        SELECT COALESCE(max(c.sibling_index) + 1, 0) INTO v_index
        FROM sessions c WHERE c.space_id = p_space AND c.parent_id = p_parent;
    ELSIF p_ttl_s IS NULL THEN
        v_index := 0;
    END IF;
    INSERT INTO sessions AS s (space_id, id, parent_id, root_id, depth, sibling_index, label,
                               source_session_id, provisional_until)
    VALUES (p_space, p_id, p_parent, COALESCE(v_root, p_id), COALESCE(v_depth, 0), v_index,
            p_label, p_source, now() + make_interval(secs => p_ttl_s))
    RETURNING s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status,
              s.source_session_id
    INTO id, parent_id, depth, sibling_index, label, status, source_session_id;
    IF p_config IS NOT NULL THEN
        INSERT INTO session_configs (space_id, session_id, config)
        VALUES (p_space, p_id, p_config);
    END IF;
    RETURN NEXT;
END
$$;

-- The outbox's events of space $1 (one array per column, `stello.events.Outbox`):
-- those of a session still provisional are dropped (`p_if_visible`: kept only once the
-- session is visible), the space's next positions taken for the rest (its
-- `space_positions` row stays locked until the commit: positions in commit order), and
-- the events written. Whether a session is visible is a scalar subquery, one probe of
-- its key per event that asks, not an EXISTS (a hashed subplan may read every visible
-- session of the space).
CREATE FUNCTION stello_flush_events(
    p_space uuid, p_kinds text[], p_sessions uuid[], p_others uuid[], p_first bigint[],
    p_last bigint[], p_ids text[], p_if_visible boolean[], p_entries uuid[]
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    kept     integer[];
    v_last   bigint;
BEGIN
    IF true = ANY (p_if_visible) THEN
        SELECT array_agg(e.ord::integer ORDER BY e.ord) INTO kept
        FROM unnest(p_sessions, p_if_visible) WITH ORDINALITY AS e (session_id, if_visible, ord)
        WHERE NOT e.if_visible
           OR (SELECT true FROM sessions s
               WHERE s.space_id = p_space AND s.id = e.session_id
                 AND s.provisional_until IS NULL
               LIMIT 1) IS NOT NULL;
    ELSE
        SELECT array_agg(g) INTO kept FROM generate_series(1, cardinality(p_kinds)) AS g;
    END IF;
    IF COALESCE(cardinality(kept), 0) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO space_positions AS p (space_id, last_position)
    VALUES (p_space, cardinality(kept))
    ON CONFLICT (space_id)
    DO UPDATE SET last_position = p.last_position + EXCLUDED.last_position
    RETURNING p.last_position INTO v_last;
    INSERT INTO space_events (space_id, position, kind, session_id, other_id, first_seq,
                              last_seq, session_ids, entry_id)
    SELECT p_space, v_last - cardinality(kept) + k.n, p_kinds[k.ord], p_sessions[k.ord],
           p_others[k.ord], p_first[k.ord], p_last[k.ord],
           CASE WHEN p_ids[k.ord] IS NOT NULL
                THEN ARRAY(SELECT jsonb_array_elements_text(p_ids[k.ord]::jsonb)::uuid) END,
           p_entries[k.ord]
    FROM unnest(kept) WITH ORDINALITY AS k (ord, n);
END
$$;

-- On Citus the functions that services call inside transactions run on the coordinator,
-- which plans each of their statements. PL/pgSQL keeps a plan per statement, and after
-- a few calls on one connection a generic one, planned without the space's value: Citus
-- then cannot prune a statement other than a single-table one to the space's shard, and
-- runs it on every shard (a trim's release in a chain of forks did:
-- tests/storage/records/test_fork_depth.py on the Citus pass, which refuses multi-task
-- queries). Custom plans keep every statement routed. Plain PostgreSQL keeps its plans.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    ALTER FUNCTION stello_release_records(uuid, uuid[], bigint)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_compact_segments(uuid, uuid, integer)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_create_session(uuid, uuid, uuid, text, uuid, float8, jsonb)
        SET plan_cache_mode = force_custom_plan;
    ALTER FUNCTION stello_flush_events(uuid, text[], uuid[], uuid[], bigint[], bigint[],
                                       text[], boolean[], uuid[])
        SET plan_cache_mode = force_custom_plan;
  END IF;
END $$;
