"""ListAll's statement for a set of filters (common.v1 SessionFilter), built per call.

Every filter is a range of one index that leads with space_id (migration 0015),
so a page reads the sessions that match, never the space:

- metadata equality drives the statement from `session_metadata_match` on the
  first pair, in the listing's (created_at, id) order (the table keeps each
  session's created_at), so a page stops after its rows; further pairs are
  primary-key probes of the same table per candidate, so the driving pair is
  the rarest one (`PAIR_MATCHES` counts each pair's entries, up to a cap of
  twice the page, by an index-only range of the same index: bounded by the page,
  not the space);
- status, parent, root and roots-only are equalities on indexes that end in
  (created_at, id): the order is the index's;
- a label prefix is a byte range of `sessions_label_prefix` (text_pattern_ops,
  whatever the collation), an updated range one of `sessions_updated`, a
  created range one of `sessions_created`.

Only the filters that are set appear in the text (an `$n IS NULL OR ...` would
keep a plan from using the index), so each combination is its own statement;
every one pins `sessions` and `session_metadata` by space_id. A filtered page
is planned for its values (`LISTING_PLANS`): a generic plan cannot tell a rare
status or a narrow updated range from a common one, and walks
`sessions_created` filtering the space (measured: 40,000 tuples read for 15
archived sessions of 20,000).
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tree_service.models import SessionFilter, Status

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

_MAX_CODE_POINT = sys.maxunicode

# Before a filtered page, in its transaction only: a plan for the page's values.
LISTING_PLANS = "SET LOCAL plan_cache_mode = force_custom_plan"

# How many sessions hold the pair ($2 key, $3 value), counted up to $4.
PAIR_MATCHES = """
SELECT count(*) FROM (
    SELECT 1 FROM session_metadata
    WHERE space_id = $1 AND key = $2 AND value = $3
    LIMIT $4
) AS found
"""


@dataclass(slots=True)
class _Statement:
    """A statement under construction: its conditions and their parameters."""

    args: list[Any] = field(default_factory=list)
    where: list[str] = field(default_factory=list)

    def param(self, value: Any, cast: str) -> str:
        self.args.append(value)
        return f"${len(self.args)}::{cast}"


def prefix_bounds(prefix: str) -> tuple[str, str | None]:
    """[low, high): the byte range of the texts that start with `prefix` (UTF-8 orders as
    code points do); high None when no text is above it (all U+10FFFF)."""
    chars = list(prefix)
    while chars and ord(chars[-1]) == _MAX_CODE_POINT:
        chars.pop()
    if not chars:
        return prefix, None
    last = ord(chars[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates are no characters: skip them
        last = 0xE000
    chars[-1] = chr(last)
    return prefix, "".join(chars)


def list_statement(
    space_id: uuid.UUID,
    status: Status | None,
    filters: SessionFilter,
    limit: int,
    after: tuple[datetime, uuid.UUID] | None,
) -> tuple[str, list[Any]]:
    """The statement of one ListAll page and its parameters ($1 the space)."""
    st = _Statement([space_id])
    where = st.where
    pairs = filters.metadata
    if pairs:
        key, value = pairs[0]
        source = (
            "FROM session_metadata d\nJOIN sessions s ON s.space_id = $1 AND s.id = d.session_id\n"
        )
        where.append("d.space_id = $1")
        where.append(f"d.key = {st.param(key, 'text')}")
        where.append(f"d.value = {st.param(value, 'text')}")
        order = ("d.created_at", "d.session_id")
    else:
        source = "FROM sessions s\n"
        where.append("s.space_id = $1")
        order = ("s.created_at", "s.id")
    where.append("s.provisional_until IS NULL")
    for key, value in pairs[1:]:
        # A scalar subquery, not EXISTS: the planner cannot turn it into a join that reads
        # every session holding the key (as a generic plan did), so it stays one probe
        # of the primary key per candidate.
        where.append(
            "(SELECT m.value FROM session_metadata m WHERE m.space_id = $1"
            f" AND m.session_id = s.id AND m.key = {st.param(key, 'text')})"
            f" = {st.param(value, 'text')}"
        )
    if status is not None:
        where.append(f"s.status = {st.param(status, 'text')}")
    if filters.root_id is not None:
        where.append(f"s.root_id = {st.param(filters.root_id, 'uuid')}")
    if filters.parent_id is not None:
        where.append(f"s.parent_id = {st.param(filters.parent_id, 'uuid')}")
    if filters.roots_only:
        where.append("s.parent_id IS NULL")
    # A label prefix or an updated range has no index in the listing's order: unless an
    # ordered index drives the page, its matches are read in a fenced subquery (OFFSET 0:
    # not flattened, so no ORDER BY ... LIMIT makes the planner walk sessions_created
    # hoping to meet them early, as it did for 20 labels of 100,000), then sorted. The
    # fence says the visibility test too (every index holds the sessions being erased
    # until the job deletes them, migration 0050: the row tells).
    ordered = bool(pairs) or filters.parent_id is not None or filters.root_id is not None
    fence: list[str] = []
    ranged = where if ordered else fence
    alias = "s" if ordered else "r"
    if filters.label_prefix is not None:
        low, high = prefix_bounds(filters.label_prefix)
        ranged.append(f"{alias}.label ~>=~ {st.param(low, 'text')}")
        if high is not None:
            ranged.append(f"{alias}.label ~<~ {st.param(high, 'text')}")
    _range(st, order[0], filters.created_after, filters.created_before)
    _range(st, f"{alias}.updated_at", filters.updated_after, filters.updated_before, ranged)
    if fence:
        source = (
            "FROM (SELECT * FROM sessions r WHERE r.space_id = $1"
            " AND r.provisional_until IS NULL AND " + " AND ".join(fence) + " OFFSET 0) s\n"
        )
    if after is not None:
        created, last_id = after
        where.append(
            f"({order[0]}, {order[1]}) > "
            f"({st.param(created, 'timestamptz')}, {st.param(last_id, 'uuid')})"
        )
    text = (
        f"{SUMMARY_COLUMNS}{source}WHERE "
        + "\n  AND ".join(where)
        + f"\nORDER BY {order[0]}, {order[1]}"
        + f"\nLIMIT {st.param(limit, 'int')}"
    )
    return text, st.args


def _range(
    st: _Statement,
    column: str,
    low: datetime | None,
    high: datetime | None,
    where: list[str] | None = None,
) -> None:
    into = st.where if where is None else where
    if low is not None:
        into.append(f"{column} >= {st.param(low, 'timestamptz')}")
    if high is not None:
        into.append(f"{column} < {st.param(high, 'timestamptz')}")
