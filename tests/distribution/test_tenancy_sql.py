"""The space_id rule of tenancy_sql: pinned statements pass, each kind of gap is named."""

from __future__ import annotations

import pytest

from tests.distribution.tenancy_sql import unpinned

TENANT = frozenset({"sessions", "records"})


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2", id="where"),
        pytest.param("SELECT 1 FROM records WHERE space_id = ANY($1)", id="any"),
        pytest.param(
            "SELECT 1 FROM sessions s JOIN records r ON r.space_id = s.space_id"
            " AND r.session_id = s.id WHERE s.space_id = $1",
            id="co-located-join",
        ),
        pytest.param(
            "WITH RECURSIVE up (id) AS (SELECT id FROM sessions WHERE space_id = $1"
            " UNION ALL SELECT p.id FROM up JOIN sessions p ON p.space_id = $1"
            " AND p.id = up.id) SELECT id FROM up",
            id="recursive-cte",
        ),
        pytest.param(
            "INSERT INTO records (space_id, session_id, seq) VALUES ($1, $2, 1)", id="insert"
        ),
        pytest.param(
            "UPDATE sessions s SET label = $3 FROM records r"
            " WHERE s.space_id = $1 AND r.space_id = $1 AND s.id = $2",
            id="update-from",
        ),
        pytest.param("SELECT count(*) FROM principals", id="not-a-tenant-table"),
    ],
)
def test_pinned(query: str) -> None:
    """Statements that pin every tenant reference by a space_id equality report nothing."""
    assert unpinned(query, TENANT) == []


@pytest.mark.parametrize(
    ("query", "gaps"),
    [
        pytest.param("SELECT 1 FROM sessions WHERE id = $1", ["sessions"], id="no-filter"),
        pytest.param(
            "SELECT 1 FROM sessions WHERE space_id = $1 OR id = $2", ["sessions"], id="or"
        ),
        pytest.param("SELECT 1 FROM sessions WHERE space_id > $1", ["sessions"], id="not-equality"),
        pytest.param(
            "SELECT 1 FROM sessions s JOIN records r ON r.session_id = s.id WHERE s.space_id = $1",
            ["records r"],
            id="join-side",
        ),
        pytest.param(
            "WITH RECURSIVE up (id) AS (SELECT id FROM sessions WHERE space_id = $1"
            " UNION ALL SELECT p.id FROM up JOIN sessions p ON p.id = up.id) SELECT id FROM up",
            ["sessions p"],
            id="recursive-second-term",
        ),
        pytest.param(
            "SELECT s.space_id FROM sessions s WHERE s.provisional_until IS NOT NULL",
            ["sessions s"],
            id="selected-not-filtered",
        ),
        pytest.param(
            "SELECT 1 FROM sessions s WHERE s.space_id = $1"
            " AND EXISTS (SELECT 1 FROM records r WHERE r.session_id = s.id)",
            ["records r"],
            id="subquery",
        ),
        pytest.param("INSERT INTO records (session_id) VALUES ($1)", ["records"], id="insert"),
        pytest.param("DELETE FROM records WHERE created_at < $1", ["records"], id="delete"),
    ],
)
def test_gaps(query: str, gaps: list[str]) -> None:
    """Each reference left unpinned is named, in any scope of the statement."""
    assert unpinned(query, TENANT) == gaps
