"""What every statement of the tree service keeps, and the fragments the rooms share.

Each room's statements live in its `repository` (and the modules beside it), as
constants. Parameters are always ``$n``; ``$1`` is the space id in every statement but
the sweep's read of the due sessions, which spans spaces by design (admin
maintenance). Every recursive
CTE filters by space_id in both of its terms. Visibility is one predicate,
``provisional_until IS NULL``: a provisional session answers as if absent, and
so does a session being erased (``provisional_until = 'infinity'``, `ERASING`).
"""

from __future__ import annotations

from stello.settings import MAX_STATEMENT_TIMEOUT_MS

# A session being erased is provisional forever (migration 0011_2): every read
# already answers it as absent, CommitSession and the sweep leave it alone, and
# the erasure job (`ERASE_*`) deletes it in batches.
ERASING = "'infinity'"

# A topology node: its row plus committed children (index order) and refs
# (insertion order). Composed into the rooms' statements at import time only.
NODE_COLUMNS = """
    s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.source_session_id,
    ARRAY(SELECT c.id FROM sessions c
          WHERE c.space_id = $1 AND c.parent_id = s.id AND c.provisional_until IS NULL
          ORDER BY c.sibling_index) AS children,
    ARRAY(SELECT r.to_id FROM session_refs r
          WHERE r.space_id = $1 AND r.from_id = s.id
          ORDER BY r.position) AS refs
"""

# A topology node without its children and refs, neither read (empty arrays): for a
# caller that asked for neither (`without_links`); a session has as many as the forks
# and refs made of it.
UNLINKED_NODE_COLUMNS = """
    s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.source_session_id,
    '{}'::uuid[] AS children, '{}'::uuid[] AS refs
"""


# A transaction bound by its caller's deadline (DeleteSubtree's, DESIGN §8): each statement
# after this may run (or wait for a row lock) for what is left of it, then the database
# cancels it (milliseconds, an integer the service computes: a SET takes no parameter).
# SET LOCAL, as _TREE_SETTINGS: it ends with the transaction (PgBouncer transaction mode)
# and on Citus reaches the worker whose rows the statement waits for.
_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = {timeout_ms:d}"

# A caller's deadline further away than the longest statement_timeout PostgreSQL takes
# (stello.settings.MAX_STATEMENT_TIMEOUT_MS: a client's "no real deadline", months ahead) is
# bound by it rather than refused by the database ("outside the valid range": INTERNAL).


def statement_timeout(timeout_ms: int) -> str:
    """The statement that bounds the transaction's next statements, in milliseconds (at
    most MAX_STATEMENT_TIMEOUT_MS)."""
    return _STATEMENT_TIMEOUT.format(timeout_ms=min(timeout_ms, MAX_STATEMENT_TIMEOUT_MS))
