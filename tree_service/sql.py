"""Every SQL statement of the tree service, as constants the repository runs.

Parameters are always ``$n``; ``$1`` is the space id in every statement but
the sweep's read of the due sessions, which spans spaces by design (admin
maintenance). Every recursive
CTE filters by space_id in both of its terms. Visibility is one predicate,
``provisional_until IS NULL``: a provisional session answers as if absent, and
so does a session being erased (``provisional_until = 'infinity'``, `ERASING`).
"""

from __future__ import annotations

# A session being erased is provisional forever (migration 0011_2): every read
# already answers it as absent, CommitSession and the sweep leave it alone, and
# the erasure job (`ERASE_*`) deletes it in batches.
ERASING = "'infinity'"

# A topology node: its row plus committed children (index order) and refs
# (insertion order). Composed into the statements below at import time only.
_NODE = """
    s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.source_session_id,
    ARRAY(SELECT c.id FROM sessions c
          WHERE c.space_id = $1 AND c.parent_id = s.id AND c.provisional_until IS NULL
          ORDER BY c.sibling_index) AS children,
    ARRAY(SELECT r.to_id FROM session_refs r
          WHERE r.space_id = $1 AND r.from_id = s.id
          ORDER BY r.position) AS refs
"""

GET_NODE = f"""
SELECT {_NODE}
FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# GetNode with include_config: the node and its stored config (NULL when never
# written) in one statement, so a joined view reads the tree once.
GET_NODE_WITH_CONFIG = f"""
SELECT {_NODE}, c.config,
       (SELECT jsonb_object_agg(m.key, m.value) FROM session_metadata m
        WHERE m.space_id = $1 AND m.session_id = s.id) AS metadata
FROM sessions s
LEFT JOIN session_configs c ON c.space_id = $1 AND c.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

LIST_ROOTS = f"""
SELECT {_NODE}
FROM sessions s
WHERE s.space_id = $1 AND s.parent_id IS NULL AND s.provisional_until IS NULL
ORDER BY s.created_at, s.id
"""

# $3: a session to leave out (GetSiblings), or NULL.
LIST_CHILDREN = f"""
SELECT {_NODE}
FROM sessions s
WHERE s.space_id = $1 AND s.parent_id = $2 AND s.provisional_until IS NULL
  AND ($3::uuid IS NULL OR s.id <> $3)
ORDER BY s.sibling_index
"""

# One row when the session is visible: its parent (NULL for a root).
VISIBLE_PARENT = """
SELECT parent_id
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
"""

# The walks up a chain (ANCESTRY, ANCESTOR_PAGE) read one row per step by primary
# key and carry every column they answer, so no join back to `sessions` follows
# them: a step is a LATERAL lookup with LIMIT 1, which the planner cannot turn
# into a hash join over the space, whatever its statistics say (a space
# bulk-loaded and never analyzed read all of its rows per GetAncestors). They
# run after WALK_PLANS, in the same transaction.

# The session (n = 0) then its ancestors, nearest first, as topology nodes.
ANCESTRY = f"""
WITH RECURSIVE s (n, id, parent_id, depth, sibling_index, label, status, source_session_id) AS (
    SELECT 0, v.id, v.parent_id, v.depth, v.sibling_index, v.label, v.status,
           v.source_session_id
    FROM sessions v
    WHERE v.space_id = $1 AND v.id = $2 AND v.provisional_until IS NULL
  UNION ALL
    SELECT s.n + 1, p.id, p.parent_id, p.depth, p.sibling_index, p.label, p.status,
           p.source_session_id
    FROM s
    CROSS JOIN LATERAL (
        SELECT a.id, a.parent_id, a.depth, a.sibling_index, a.label, a.status,
               a.source_session_id
        FROM sessions a
        WHERE a.space_id = $1 AND a.id = s.parent_id
        LIMIT 1
    ) p
)
SELECT {_NODE}
FROM s
ORDER BY s.n
"""

# ListAncestors: $2 where the walk starts (the session, or the last ancestor of
# the previous page: n = 0), $3 the ancestors to read (n = 1..$3), $4 the
# session itself, which must still be visible (else no row at all). A start
# other than the session must be of the session's tree and above it (a root
# and a depth checked by key: a token naming a session of another tree, or one
# not above the session, gives no row either; proving the start on the
# session's own branch would walk the pages before this one). A page reads its
# own rows only.
ANCESTOR_PAGE = """
WITH RECURSIVE chain (n, id, parent_id, depth, sibling_index, label, status, turn_count,
                      source_session_id) AS (
    SELECT 0, s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.turn_count,
           s.source_session_id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
      AND EXISTS (SELECT 1 FROM sessions v
                  WHERE v.space_id = $1 AND v.id = $4 AND v.provisional_until IS NULL
                    AND (v.id = s.id OR (v.root_id = s.root_id AND v.depth > s.depth)))
  UNION ALL
    SELECT chain.n + 1, p.id, p.parent_id, p.depth, p.sibling_index, p.label, p.status,
           p.turn_count, p.source_session_id
    FROM chain
    CROSS JOIN LATERAL (
        SELECT a.id, a.parent_id, a.depth, a.sibling_index, a.label, a.status, a.turn_count,
               a.source_session_id
        FROM sessions a
        WHERE a.space_id = $1 AND a.id = chain.parent_id
        LIMIT 1
    ) p
    WHERE chain.n < $3
)
SELECT id, parent_id, depth, sibling_index, label, status, turn_count, source_session_id
FROM chain
ORDER BY n
"""

# Before a walk, in its transaction only (SET LOCAL): plans that read `sessions`
# by index and join by nested loop, so the children and refs of each node are
# index lookups too, however wrong the statistics (a parent_id that looks
# shared by the whole space would otherwise make each a scan of it).
WALK_PLANS = """
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_hashjoin = off;
SET LOCAL enable_mergejoin = off
"""

# A summary's columns, its metadata read by the session's primary-key prefix.
SUMMARY_COLUMNS = """
SELECT s.id, s.parent_id, s.label, s.status, s.turn_count,
       s.created_at, s.updated_at, s.last_active_at, s.pinned,
       (SELECT jsonb_object_agg(m.key, m.value) FROM session_metadata m
        WHERE m.space_id = $1 AND m.session_id = s.id) AS metadata
"""

_SUMMARY = f"""
{SUMMARY_COLUMNS}
FROM sessions s
WHERE s.space_id = $1 AND s.provisional_until IS NULL
  AND ($2::text IS NULL OR s.status = $2)
"""

# $2 status or NULL, $3 limit.
LIST_ALL_FIRST = f"""
{_SUMMARY}
ORDER BY s.created_at, s.id
LIMIT $3
"""

# $4, $5: the (created_at, id) of the last session of the previous page.
LIST_ALL_AFTER = f"""
{_SUMMARY}
  AND (s.created_at, s.id) > ($4::timestamptz, $5::uuid)
ORDER BY s.created_at, s.id
LIMIT $3
"""

# ResolveSessionPrefix: $2, $3 the lowest and highest id of the prefix, $4 the
# limit. One range of the (space_id, id) primary key: only matching rows are read.
RESOLVE_PREFIX = f"""
{SUMMARY_COLUMNS}
FROM sessions s
WHERE s.space_id = $1 AND s.id BETWEEN $2 AND $3 AND s.provisional_until IS NULL
ORDER BY s.id
LIMIT $4
"""

# GetTree below a depth limit, or of one subtree: one recursive CTE, no path
# arrays (quadratic on deep chains); the caller builds the pre-order, and the
# reply's bytes from these columns (ids as text: PostgreSQL's uuid_out costs less
# than a UUID object and its str() per node). {top} picks the top session(s), their
# created_at in `top_at` (NULL below them: the caller orders the tops by (top_at,
# id)); $2 max levels below the top (NULL = all); $3 row cap (the limit stops the
# recursion early). Each level's children are read by a LATERAL lookup per parent,
# so the rows read are the rows answered whatever the planner believes about the
# space (see tree_settings).
_TREE = """
WITH RECURSIVE tree AS (
    SELECT s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.turn_count,
           s.source_session_id, s.created_at AS top_at, 0 AS level
    FROM sessions s
    WHERE s.space_id = $1 AND s.provisional_until IS NULL AND {top}
  UNION ALL
    SELECT c.id, c.parent_id, c.depth, c.sibling_index, c.label, c.status, c.turn_count,
           c.source_session_id, NULL::timestamptz, tree.level + 1
    FROM tree
    CROSS JOIN LATERAL (
        SELECT k.id, k.parent_id, k.depth, k.sibling_index, k.label, k.status, k.turn_count,
               k.source_session_id
        FROM sessions k
        WHERE k.space_id = $1 AND k.parent_id = tree.id AND k.provisional_until IS NULL
        ORDER BY k.sibling_index
    ) c
    WHERE $2::int4 IS NULL OR tree.level < $2
)
SELECT id::text, parent_id::text, depth, sibling_index, label, status, turn_count,
       source_session_id::text, top_at
FROM tree
LIMIT $3
"""

# Run first in GetTree's transaction (SET LOCAL: PgBouncer transaction mode keeps working).
# A plan is made for each call (a generic one cached while the space was small would scan
# the whole space once per level: quadratic on a chain, minutes after a bulk load), the
# children of a node are one (space_id, parent_id) index range each, found in sibling order
# (no sort: the planner, which may believe the space holds one row, cannot pick another
# index), and a statement timeout bounds what is left (milliseconds, an integer the
# service computes: a SET takes no parameter). SET LOCAL statements, not set_config():
# on Citus they reach the worker that runs the walk (the database's default
# citus.propagate_set_commands = 'local', stello.distribution), which otherwise plans it
# from statistics taken while the shard was small (10 s for 2,001 rows of a chain, measured).
_TREE_SETTINGS = """
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL enable_sort = off;
SET LOCAL statement_timeout = {timeout_ms:d}
"""


def tree_settings(timeout_ms: int) -> str:
    """GetTree's settings for its transaction, the timeout in milliseconds."""
    return _TREE_SETTINGS.format(timeout_ms=timeout_ms)


# A transaction bound by its caller's deadline (DeleteSubtree's, DESIGN §8): each statement
# after this may run (or wait for a row lock) for what is left of it, then the database
# cancels it (milliseconds, an integer the service computes: a SET takes no parameter).
# SET LOCAL, as _TREE_SETTINGS: it ends with the transaction (PgBouncer transaction mode)
# and on Citus reaches the worker whose rows the statement waits for.
_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = {timeout_ms:d}"


def statement_timeout(timeout_ms: int) -> str:
    """The statement that bounds the transaction's next statements, in milliseconds."""
    return _STATEMENT_TIMEOUT.format(timeout_ms=timeout_ms)


# After a GetTree read ran past its bound: whether the space's sessions answer at all
# (one row, by the primary key's prefix) within the probe's own bound. A database that
# does not (a Citus worker frozen or out of reach, a lock held on the table) is told
# apart from a tree too large to read in time.
PROBE_SPACE = "SELECT 1 FROM sessions WHERE space_id = $1 LIMIT 1"


# The whole forest, no depth limit ($2 row cap): the visible sessions of the space,
# one read of its index range in no order (the caller builds the pre-order, tops
# where `top_at` is set), columns as _TREE's. They are the forest itself, no walk
# needed (a walk costs a lookup per session: 3x the read of 10,000, measured): a
# provisional session has no children (CREATE_SESSION takes a visible parent), a
# hidden one is hidden with its whole subtree (LOCK_SUBTREE, LOCK_MISSED), so every
# visible session's ancestors are visible. A session whose parent was missing all
# the same would be left out of the answer by the walk (it hangs off no top).
_WHOLE = """
SELECT s.id::text, s.parent_id::text, s.depth, s.sibling_index, s.label, s.status,
       s.turn_count, s.source_session_id::text,
       CASE WHEN s.parent_id IS NULL THEN s.created_at END AS top_at
FROM sessions s
WHERE s.space_id = $1 AND s.provisional_until IS NULL{within}
LIMIT $2
"""

FOREST = _WHOLE.format(within="")

# A root's whole tree ($3 the root), as FOREST reads a space's: the visible sessions of
# the root (one root_id index range). No row when $3 is no visible root: the caller
# walks its subtree with SUBTREE then (a parent never changes, so root_id is exact).
ROOT_TREE = _WHOLE.format(within=" AND s.root_id = $3")

# Every root of the space and their subtrees, to $2 levels below the roots.
FOREST_TO_DEPTH = _TREE.format(top="s.parent_id IS NULL")

# $4: the top session.
SUBTREE = _TREE.format(top="s.id = $4")

# -- CreateSession / CommitSession ---------------------------------------------

# Takes the parent's row lock (serialising sibling indexes) and bumps it.
LOCK_PARENT = """
UPDATE sessions SET updated_at = now()
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
RETURNING id
"""

# One statement creates a session and its config: $3 the parent (NULL for a
# root), $4 the label, $5 the source, $6 the provisioning TTL in seconds (NULL =
# visible now), $7 the config (NULL = none). It inserts nothing when the parent or the source
# is not a visible session of the space, and always answers one row that says
# which. A provisional session takes no index yet; a visible child takes the
# next one, so its caller holds the parent's row lock (LOCK_PARENT) first. A
# function (migration 0033) of statements each routed to the space's worker on
# Citus: as one statement, its INSERTs were CTEs, which Citus plans through every
# worker (explore5 F4).
CREATE_SESSION = """
SELECT * FROM stello_create_session($1, $2, $3, $4, $5, $6::float8, $7::jsonb)
"""

# The new session's metadata ($3 keys, $4 values), with its created_at (the
# order of filtered listings), in CreateSession's transaction.
INSERT_METADATA = """
INSERT INTO session_metadata (space_id, session_id, key, value, created_at)
SELECT $1, $2, m.key, m.value, s.created_at
FROM unnest($3::text[], $4::text[]) AS m (key, value)
JOIN sessions s ON s.space_id = $1 AND s.id = $2
"""

# A session's metadata pairs (a fork's source, or before a change).
METADATA = """
SELECT key, value FROM session_metadata WHERE space_id = $1 AND session_id = $2
"""

# UpdateSessionMetadata's lock: a visible session's row, its metadata then
# changed under it (one change at a time per session).
LOCK_METADATA = """
SELECT id FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR NO KEY UPDATE
"""

# $3 keys, $4 values written (added or replaced).
UPSERT_METADATA = """
INSERT INTO session_metadata AS m (space_id, session_id, key, value, created_at)
SELECT $1, $2, p.key, p.value, s.created_at
FROM unnest($3::text[], $4::text[]) AS p (key, value)
JOIN sessions s ON s.space_id = $1 AND s.id = $2
ON CONFLICT (space_id, session_id, key) DO UPDATE SET value = EXCLUDED.value
"""

# $3 keys removed.
DELETE_METADATA = """
DELETE FROM session_metadata
WHERE space_id = $1 AND session_id = $2 AND key = ANY ($3::text[])
"""

# CommitSession's first statement: row-lock the session (provisional or not)
# and, when it is still provisional, its parent, both in ONE pass in id order
# (FOR NO KEY UPDATE, the lock a bump takes): commits under one parent then
# assign indexes one at a time. Child then parent, a CommitSession deadlocked
# with a trim of one of them whose readers include the other (a trim locks in
# id order: storage's LOCK_FOR_TRIM). The parent is read before the lock: a
# session's parent never changes, and a committed session is provisional no
# more, so a session still provisional once locked had its parent locked too.
# One row per locked session, `target` on the session's, with its metadata
# (CommitSession answers it: no statement of its own); none for the session
# when it does not exist.
LOCK_FOR_COMMIT = f"""
SELECT s.id = $2 AS target, s.provisional_until IS NOT NULL AS provisional,
       CASE WHEN s.id = $2 THEN (SELECT jsonb_object_agg(m.key, m.value)
                                 FROM session_metadata m
                                 WHERE m.space_id = $1 AND m.session_id = s.id) END AS metadata
FROM sessions s
WHERE s.space_id = $1
  AND s.id = ANY (ARRAY[$2::uuid, (SELECT c.parent_id FROM sessions c
                                   WHERE c.space_id = $1 AND c.id = $2
                                     AND c.provisional_until IS NOT NULL)])
  AND (s.id <> $2 OR s.provisional_until IS DISTINCT FROM {ERASING})
ORDER BY s.id
FOR NO KEY UPDATE OF s
"""

TOUCH = """
UPDATE sessions SET updated_at = now()
WHERE space_id = $1 AND id = $2
"""

# max + 1 under the parent's lock (`LOCK_FOR_COMMIT`): deletes leave gaps,
# never duplicates. The parent's bump is here, on the row already locked: no
# statement after the lock takes a row lock out of id order.
COMMIT_SESSION = f"""
WITH parent AS (
    UPDATE sessions p SET updated_at = now()
    WHERE p.space_id = $1
      AND p.id = (SELECT c.parent_id FROM sessions c WHERE c.space_id = $1 AND c.id = $2)
    RETURNING p.id
)
UPDATE sessions s
SET provisional_until = NULL,
    sibling_index = CASE
        WHEN s.parent_id IS NULL THEN 0
        ELSE (SELECT COALESCE(max(c.sibling_index) + 1, 0)
              FROM sessions c WHERE c.space_id = $1 AND c.parent_id = s.parent_id) END
WHERE s.space_id = $1 AND s.id = $2
RETURNING {_NODE}
"""

# -- Refs, status, label -------------------------------------------------------

# The visible ones of sessions $2, each by one probe of the key: a generic plan
# of `id = ANY ($2)` read every session of a space its statistics called small.
REF_ENDS = """
SELECT s.id, s.root_id, s.depth
FROM (SELECT DISTINCT unnest($2::uuid[])) AS k (id)
CROSS JOIN LATERAL (
    SELECT id, root_id, depth FROM sessions
    WHERE space_id = $1 AND id = k.id AND provisional_until IS NULL
    LIMIT 1
) s
"""

# Whether $3 is an ancestor of $2: walk up from $2, stopping at $3. Each step
# is one probe of the key (a LATERAL ... LIMIT 1, as ANCESTORS walks), not a
# join: statistics that call the space small made it a hash join that read
# every session of the space at each level.
IS_ANCESTOR = """
WITH RECURSIVE up (parent_id) AS (
    SELECT s.parent_id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2
  UNION ALL
    SELECT p.parent_id
    FROM up
    CROSS JOIN LATERAL (
        SELECT a.parent_id FROM sessions a
        WHERE a.space_id = $1 AND a.id = up.parent_id
        LIMIT 1
    ) p
    WHERE up.parent_id <> $3
)
SELECT EXISTS (SELECT 1 FROM up WHERE up.parent_id = $3)
"""

# AddRef's first write: row-lock the from-session, so the INSERT_REF after it
# (a new statement, a new snapshot) sees every ref committed before it.
LOCK_REF_SOURCE = """
SELECT id
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR NO KEY UPDATE
"""

# A per-session order (no sequence spans spaces): max + 1 under the
# from-session's row lock; removals leave gaps, never duplicates.
INSERT_REF = """
INSERT INTO session_refs (space_id, from_id, to_id, position)
SELECT $1, $2, $3, COALESCE(max(r.position) + 1, 0)
FROM session_refs r
WHERE r.space_id = $1 AND r.from_id = $2
ON CONFLICT (space_id, from_id, to_id) DO NOTHING
RETURNING position
"""

DELETE_REF = """
DELETE FROM session_refs
WHERE space_id = $1 AND from_id = $2 AND to_id = $3
RETURNING position
"""

# No-op (no bump) when the status is already $3. $4: the time of the change (a
# parameter: Citus runs no now() inside a CASE of a modification, DESIGN §4.7).
# An unarchive is activity: it moves last_active_at (and so the day retention
# judges by), or the next sweep would archive again what the user just took back.
SET_STATUS = """
UPDATE sessions
SET status = $3, updated_at = now(),
    archived_at = CASE WHEN $3 = 'archived' THEN $4::timestamptz END,
    last_active_at = CASE WHEN $3 = 'active' THEN GREATEST(last_active_at, $4::timestamptz)
                          ELSE last_active_at END
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL AND status <> $3
"""

LOCK_STATUS = """
SELECT status
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR NO KEY UPDATE
"""

SET_LABEL = f"""
UPDATE sessions s SET label = $3, updated_at = now()
WHERE s.space_id = $1 AND s.id = $2
RETURNING {_NODE}
"""

# -- Config --------------------------------------------------------------------

# One row when the session is visible; config NULL when never written.
GET_CONFIG = """
SELECT c.config
FROM sessions s
LEFT JOIN session_configs c ON c.space_id = $1 AND c.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# Whole overwrite; no row when the session is not visible. The time is the
# insert's (the column's default now()): no now() in an ON CONFLICT DO UPDATE
# on Citus (DESIGN §4.7).
PUT_CONFIG = """
INSERT INTO session_configs (space_id, session_id, config)
SELECT s.space_id, s.id, $3::jsonb
FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
ON CONFLICT (space_id, session_id)
DO UPDATE SET config = EXCLUDED.config, updated_at = EXCLUDED.updated_at
RETURNING config
"""

# The key ListAncestors tokens are signed with (global: one per deployment).
TOKEN_KEY = "SELECT secret FROM token_keys WHERE purpose = 'page_tokens'"

# -- Erasure -------------------------------------------------------------------

# Row-locks the visible session and every descendant not already being erased
# (provisional ones included), and answers their ids: once held, no child can
# be created or committed under any of them (both need the parent's row lock).
# A child committed between this statement's snapshot and its lock is not in
# the set: `LOCK_MISSED` finds and locks it after the hide, in the same
# transaction, and it is hidden too.
#
# It reads the subtree, not the space, whatever the statistics: each session's
# children are one range of `sessions_parent` (LATERAL, OFFSET 0: not flattened
# into a join), then each is locked by one primary-key probe, in id order (the
# nested loop locks them in its outer side's order). As joins, when the
# statistics called the space small (a big space grown since the last ANALYZE),
# the planner hashed the whole space's sessions once per level and once for the
# lock (240,802 tuples to lock 100 three levels deep in a space of 30,000).
# The children of each of `parents` (`parent` its id), not being erased; the
# step of LOCK_SUBTREE's walk and the start of LOCK_MISSED's.
_CHILDREN_OF = f"""
    SELECT c.id
    FROM {{parents}}
    CROSS JOIN LATERAL (
        SELECT c.id FROM sessions c
        WHERE c.space_id = $1 AND c.parent_id = {{parent}}
          AND c.provisional_until IS DISTINCT FROM {ERASING}
        OFFSET 0
    ) c
"""
_SUBTREE_CHILDREN = _CHILDREN_OF.format(parents="subtree", parent="subtree.id")
# Each found session locked, unless a delete that held it first hid it: a lock that
# waited reads the row as that delete committed it (the condition is checked again on
# the newest version), so two deletes of one subtree at once hide it once (the second
# finds nothing: NOT_FOUND), and a delete of an ancestor leaves out what a delete below
# it hid first. Without the condition each answered every id and wrote its events.
_LOCK_FOUND = f"""
SELECT array_agg(locked.id)
FROM (
    SELECT l.id
    FROM (SELECT DISTINCT id FROM subtree ORDER BY id) f
    CROSS JOIN LATERAL (
        SELECT s.id FROM sessions s
        WHERE s.space_id = $1 AND s.id = f.id
          AND s.provisional_until IS DISTINCT FROM {ERASING}
        FOR UPDATE OF s
    ) l
) locked
"""
LOCK_SUBTREE = f"""
WITH RECURSIVE subtree (id) AS (
    SELECT s.id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
  UNION ALL
{_SUBTREE_CHILDREN}
)
{_LOCK_FOUND}"""

# Hides the locked set ($2) from every read and write at once; its ids by
# depth (the session first), then id, for DeleteSubtree's answer and its
# events (sorted here: 200,000 rows sort in Python in most of a second).
_HIDE = f"""
WITH hidden AS (
    UPDATE sessions s
    SET provisional_until = {ERASING}
    {{rows}}
    RETURNING s.id, s.depth
)
SELECT id, depth FROM hidden ORDER BY depth, id
"""

# A set of up to HIDE_PROBES_MAX: each row found by one primary-key probe
# (LATERAL) and updated by its tuple id, whatever the statistics. As a set
# condition (`id = ANY ($2)`) it was planned as a scan of the space's sessions
# when its statistics called the space small (a big space grown since the last
# ANALYZE: 60,000 tuples to hide 100 in a space of 30,000). The rows are
# locked, so their tuple ids hold.
HIDE_SUBTREE = _HIDE.format(
    rows="""FROM (
        SELECT l.ctid
        FROM unnest($2::uuid[]) AS h (id)
        CROSS JOIN LATERAL (
            SELECT v.ctid FROM sessions v WHERE v.space_id = $1 AND v.id = h.id OFFSET 0
        ) l
    ) t
    WHERE s.space_id = $1 AND s.ctid = t.ctid"""
)

# A bigger set as a set: the probes and the join back by tuple id cost a fifth
# more than the update itself at 200,000 sessions (bench/bench_delete.py:
# answered in 6.0 s, against 5.0 s), and a scan of the space, where stale
# statistics still choose one, is then a part of it.
HIDE_SUBTREE_SET = _HIDE.format(rows="WHERE s.space_id = $1 AND s.id = ANY ($2::uuid[])")
HIDE_PROBES_MAX = 10_000

# What other sessions show of the hidden set goes with the hide: their refs to
# it, and its id as their source (both one index probe per hidden session).
HIDE_REFS = """
DELETE FROM session_refs
WHERE space_id = $1 AND to_id = ANY ($2::uuid[]) AND from_id <> ALL ($2::uuid[])
"""

# The children of the hidden set ($2) left out of it (committed while the set
# was being locked: their creates held a parent's lock first) and their
# descendants, row-locked as LOCK_SUBTREE does; their ids (NULL: none). One
# index probe per hidden session. A create that comes after the set's lock
# waits for it, then finds its parent gone; so each round finds only the
# children committed while the previous round's rows were being locked.
LOCK_MISSED = f"""
WITH RECURSIVE subtree (id) AS (
{_CHILDREN_OF.format(parents="unnest($2::uuid[]) AS p (id)", parent="p.id")}
  UNION ALL
{_SUBTREE_CHILDREN}
)
{_LOCK_FOUND}"""

# -- The erasure job (spans spaces: maintenance) ---------------------------------

# A space with sessions being erased ($1 of them at most; the partial
# provisional index finds them).
ERASE_SPACES = f"""
SELECT DISTINCT d.space_id
FROM (SELECT space_id FROM sessions WHERE provisional_until = {ERASING} LIMIT $1) d
"""

# The deepest ($2) sessions being erased in space $1 (unlocked), deepest first:
# no other hidden session is below any of them, so deleting them in this order
# satisfies the parent key (no action) at each step. Only this job (one at a time) changes a
# hidden row, so the chosen rows are still hidden when `ERASE_CLAIM` locks them.
ERASE_CHOOSE = f"""
SELECT d.id
FROM sessions d
WHERE d.space_id = $1 AND d.provisional_until = {ERASING}
ORDER BY d.depth DESC
LIMIT $2
"""

# The chosen batch ($2), row-locked in id order: the order a Fork INHERIT
# locks its source and the holders of its segments in (storage's lineage,
# `LOCK_HOLDERS_BELOW`), some of which may be in the batch. A trim locks no
# hidden session (migration 0023; its statement may still meet one hidden
# after it began). SKIP LOCKED, as
# `READERS`: a row held by another is left out, and the job, finding fewer
# rows than it chose, rolls back and tries again a little later
# (`TreeRepository.erase_batch`); so it never waits while it holds a lock,
# and (unlike NOWAIT) no conflict is an ERROR in the server's log. Its
# patient tries wait for the readers (`READERS_WAITING`) BEFORE this claim,
# holding none of the batch; never for the batch itself.
#
# Each session of the batch ($2, sorted by id) is one primary-key probe whatever
# the statistics: a set condition (`id = ANY ($2)`) let the planner scan the
# space's sessions being erased when its statistics called the space small (a
# big space grown since the last ANALYZE), so every batch read all that waited
# behind it (30,000 for a batch of 100): an erasure quadratic in its size.
# "Being erased" is `IS NOT DISTINCT FROM` for the same reason: `= 'infinity'`
# is the predicate of the `sessions_erasing` index, which offers a scan by
# space alone.
ERASE_CLAIM = f"""
SELECT c.id
FROM unnest($2::uuid[]) AS b (id)
CROSS JOIN LATERAL (
    SELECT s.id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = b.id AND s.provisional_until IS NOT DISTINCT FROM {ERASING}
    FOR UPDATE OF s SKIP LOCKED
) c
"""

# The sessions reading rows that the released ones ($2) hold, the others, in id
# order: each holder's segments one range of `record_segments_holder`, each
# reader one primary-key probe, whatever the statistics (a set condition, `id =
# ANY (...)`, let the planner scan the space when its statistics called it
# small: 30,000 sessions for a batch's readers). Stable while the released ones
# are locked (a fork adding a reader key-shares a holder).
_READER_IDS = """
SELECT DISTINCT g.session_id AS id
FROM unnest($2::uuid[]) AS h (id)
CROSS JOIN LATERAL (
    SELECT g.session_id FROM record_segments g
    WHERE g.space_id = $1 AND g.holder_id = h.id AND g.session_id <> ALL ($2::uuid[])
    OFFSET 0
) g
ORDER BY 1
"""

# The readers of a release (the erasure job's batch, the sweep's claimed
# sessions), locked as `stello_release_records` then finds them (FOR NO KEY
# UPDATE, in id order: the nested loop locks them in its outer side's order).
# SKIP LOCKED: the job never waits for a row lock while
# it holds its batch, so it closes no cycle of waits (a trim whose statement
# began before a session was hidden may still wait for it in the batch; a
# fork holding a batch session's key share may wait for a trim that holds its
# source); `UNLOCKED_READER` then tells whether one was skipped, and the
# release backs off and tries again. Its patient tries first lock the readers
# waiting (`READERS_WAITING`, of the chosen or due sessions), before they
# claim any: held by a trim whose statement waits for a batch row, a reader
# was waited for while the batch was held, and the two deadlocked (seen on
# Citus); the pass after the claim then only finds a reader a fork added
# meanwhile.
_READERS = f"""
SELECT l.id
FROM ({_READER_IDS}) r
CROSS JOIN LATERAL (
    SELECT s.id FROM sessions s
    WHERE s.space_id = $1 AND s.id = r.id
    FOR NO KEY UPDATE OF s {{wait}}
) l
"""
READERS = _READERS.format(wait="SKIP LOCKED")
READERS_WAITING = _READERS.format(wait="")

# Whether a reader of the released sessions ($2) is not among the locked ($3)
# (a segment's session is a session: its key cascades from `sessions`): the
# readers as `READERS` finds them, each holder's one range of
# `record_segments_holder`, then those not locked (as storage's
# `UNLOCKED_FOR_TRIM`). Not a `LIMIT 1` probe of each holder's segments for one
# that is not locked: there is none but when a fork came meanwhile, and the
# planner, which takes a holder for its table's rows over its distinct holders,
# expected one early in a scan of the table. Under statistics that called the
# holders of a space 40 (ANALYZE's sample of test_release_reads' space says 38
# to 50), its custom plan was that scan, and under 10 its generic one too: each
# batch read every segment of the space (81,418 tuples, in one CI run through
# PgBouncer) where the range reads the released sessions' readers' (50).
UNLOCKED_READER = f"""
SELECT EXISTS (SELECT FROM ({_READER_IDS}) r WHERE r.id <> ALL ($3::uuid[]))
"""

# Before the DELETE, the batch gives up its records (storage's
# `stello_release_records`, migration 0009): rows that forks outside it still
# read through their lineage move, once, to one of them (DESIGN §4.4), and
# the batch's own segments and lineages go.
ERASE_RELEASE = """
SELECT stello_release_records($1, $2::uuid[], NULL)
"""

# Sessions outside the set forked from one inside it lose their source (Citus
# allows no SET NULL key action on a key holding space_id): at the hide, and
# again for each batch (a fork made meanwhile of a hidden session cannot be,
# but the key needs none left). `IS NOT NULL`: `sessions_source` holds only
# the sessions that have a source (migration 0025), and a parameter array
# does not tell the planner so.
UNSOURCE = """
UPDATE sessions SET source_session_id = NULL
WHERE space_id = $1 AND source_session_id IS NOT NULL
  AND source_session_id = ANY ($2::uuid[]) AND id <> ALL ($2::uuid[])
"""

# The erasure job's form of `UNSOURCE`: every session forked from one of the
# claimed batch loses its source, the batch's own included: they then go one
# DELETE at a time (`ERASE_DELETE`), so no key among them may be left for the end
# of one statement to settle. `ERASE_FORKED` finds which of the batch ($2) are a
# source, each an index probe of `sessions_source` whatever the statistics (most
# are none); `ERASE_UNSOURCE` then runs for each that is ($2 one of them).
ERASE_FORKED = """
SELECT b.id
FROM unnest($2::uuid[]) AS b (id)
WHERE (SELECT true FROM sessions s WHERE s.space_id = $1 AND s.source_session_id = b.id
       LIMIT 1) IS NOT NULL
"""
ERASE_UNSOURCE = """
UPDATE sessions SET source_session_id = NULL
WHERE space_id = $1 AND source_session_id = $2
"""

# One session of the claimed batch ($2), by its primary key (run for each, deepest
# first, in one pipeline: `ERASE_CLAIM` says why not one set statement; a parent
# goes after its children, as its key is NO ACTION); records, slots, caches,
# configs, refs and the links of remembered replies follow by cascade.
ERASE_DELETE = f"""
DELETE FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NOT DISTINCT FROM {ERASING}
"""

# -- Sweep (spans spaces: admin maintenance) ------------------------------------

TRY_SWEEP_LOCK = """
SELECT pg_try_advisory_xact_lock($1)
"""

WAIT_SWEEP_LOCK = """
SELECT pg_advisory_xact_lock($1)
"""

# The due provisional sessions of every space (unlocked): $1 older_than_s
# (0 = past provisional_until), $2 batch size. Sessions being erased are the
# erasure job's. The bound on provisional_until is a condition of its own, not
# a branch of the CASE, so a generic plan ends its range of
# `sessions_provisional` at now() too: a CASE alone was a filter, and the scan
# read every provisional session of every space, those still being created
# included (2,100 index entries for 100 due).
_SWEEP_DUE = f"""
SELECT d.space_id, d.id
FROM sessions d
WHERE {{space}}d.provisional_until IS NOT NULL AND d.provisional_until <> {ERASING}
  AND d.provisional_until < CASE WHEN $1::float8 > 0 THEN {ERASING}::timestamptz ELSE now() END
  AND CASE WHEN $1::float8 > 0
           THEN d.created_at < now() - make_interval(secs => $1::float8)
           ELSE true END
ORDER BY d.provisional_until, {{order}}d.id
LIMIT $2
"""
SWEEP_DUE = _SWEEP_DUE.format(space="", order="d.space_id, ")

# SWEEP_DUE in space $3 alone: a sweep's fallback when the read across spaces failed (a
# node out of reach: `stello.periodic.Periodic.by_space`), routed to the space's worker.
SWEEP_DUE_IN_SPACE = _SWEEP_DUE.format(space="d.space_id = $3\n  AND ", order="")

# The sweep goes space by space over the due pairs SWEEP_DUE read (unlocked):
# Citus locks rows only in a statement routed to one shard (DESIGN §4.7), so
# each space's due sessions are claimed, released and deleted by statements
# pinned to that space. Rows a CommitSession holds right now are skipped: it
# is making them visible (and a committed one is provisional no more). Then
# their readers are locked as the erasure job locks its batch's (`READERS`,
# SKIP LOCKED, `UNLOCKED_READER`): a sweep that finds one held rolls the
# space's work back to its savepoint and tries again a little later, so it
# never waits for a reader while it holds claimed rows (its patient tries
# wait for the readers before the claim). Each due session is one primary-key
# probe, in id order (the lock's order), whatever the statistics: as a set
# (`id = ANY ($2)`) the claim was planned on `sessions_provisional`, reading every
# provisional session of every space for each space claimed (84,000 tuples to
# sweep 100 of 20 spaces beside 2,000 being created). The provisional test is a
# COALESCE, which the planner cannot match to that index's predicate: written
# `IS NOT NULL AND <> 'infinity'` it probed that index for each id instead.
SWEEP_CLAIM = f"""
SELECT l.id
FROM (SELECT DISTINCT c.id FROM unnest($2::uuid[]) AS c (id) ORDER BY 1) c
CROSS JOIN LATERAL (
    SELECT d.id FROM sessions d
    WHERE d.space_id = $1 AND d.id = c.id
      AND COALESCE(d.provisional_until, {ERASING}) <> {ERASING}
    FOR UPDATE OF d SKIP LOCKED
) l
"""

# The claimed sessions give up their records first (a provisional session can
# hold rows for forks: DESIGN §4.4, migration 0009); on Citus the call is
# delegated whole to the space's worker.
SWEEP_RELEASE = """
SELECT stello_release_records($1, $2::uuid[], NULL)
"""

# One claimed session ($2), by its primary key (run for each in one pipeline): a
# set condition (`id = ANY ($2)`) let the planner scan the space's sessions when
# its statistics called the space small (a big space grown since the last
# ANALYZE: 60,000 tuples to delete 100 in a space of 30,000). One at a time is
# the set's meaning: a provisional session is no parent and no source (a create
# or a fork needs a visible one), so no key among the claimed waits for the end
# of a statement; and each claimed row, locked and provisional, goes.
SWEEP_DELETE = """
DELETE FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NOT NULL
"""
