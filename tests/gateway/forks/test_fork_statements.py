"""Fork and CreateRoot in few SQL statements (#18): the remembered entry is the Transact's
once-only key and the tree's key is one insert after the work, so a Fork NONE or a CreateRoot
writes two idempotency keys (the tree's and the remembered session), each in one statement, and
no claim. Counted with pg_stat_statements (top-level statements of this database; transaction
control and the tree's periodic sweep left out: they do not depend on the call)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from stello.serving.health import READ_ONLY_PROBE
from tests.gateway.conftest import Stack

pytestmark = pytest.mark.sql

COUNTED = """
SELECT query, sum(calls)::int AS calls
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel
  AND query NOT LIKE '%pg_stat_statements%'
GROUP BY query
"""

# Statements that are not the call's work: transaction control (the sweeper's transactions
# have it too), PgBouncer's parameter sync (SET, when it hands a server connection to another
# client), the sweep's own (its lock, the due rows, the key purge), the key lookups of
# authentication (tests cache keys for 0 s: one per RPC), and a new pool connection's setup
# (asyncpg's type introspection, with JIT set off and back). Background work may still land
# in a count (a health ping, a connection opened meanwhile): each call is counted RUNS times
# and the quietest count is the call's.
RUNS = 3
# The servers' readiness pings (their health follows the database) and PgBouncer's server
# check, as pg_stat_statements shows them (constants normalised or not).
PINGS = ("SELECT 1", "SELECT $1")
NOT_THE_CALL = ("BEGIN", "COMMIT", "ROLLBACK", "SET ", "SELECT pg_try_advisory_xact_lock")
OTHER_MARKS = (
    "FROM sessions d",
    "DELETE FROM idempotency_keys WHERE created_at <",
    "FROM api_keys k",
    "typeinfo_tree",
    "set_config(",
    # The servers' health monitors (stello.serving.health, over connections of their own: a check
    # every 0.2 s in the tests, so the three runs of a count all met one now and then).
    READ_ONLY_PROBE,
    "schema_migrations",
)

KEY_INSERTS = ("INSERT INTO idempotency_keys", "stello_remember(", "stello_remember_new(")
"""What a statement that remembers a reply contains: the insert, or (migration 0034) the call
of the function that makes it and its links, a router statement on Citus."""

# A Fork NONE (no request_id): tree GetConfig (1); CreateSession: the session with its config,
# its key (2); Transact: the remembered session, the meta, the prompt, the events (4);
# CommitSession: the lock, the commit, the events (3). Main before #18 ran 12 (claims and
# upserts: 4 key statements).
FORK_NONE_STATEMENTS = 10
# A CreateRoot with a system prompt: CreateSession (2); Transact: the remembered session, the
# meta, the prompt, the events (4); CommitSession (3).
CREATE_ROOT_STATEMENTS = 9


@pytest.fixture(name="statements")
async def _statements(
    direct_database_url: str,
) -> AsyncIterator[Callable[[Callable[[], Awaitable[Any]]], Awaitable[Counter[str]]]]:
    """Counts the top-level statements `work` makes: by query text, the call's only."""
    con = await asyncpg.connect(direct_database_url)
    if "pg_stat_statements" not in await con.fetchval("SHOW shared_preload_libraries"):
        await con.close()
        pytest.skip("this server does not preload pg_stat_statements (the embedded one does)")
    await con.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    async def count_once(work: Callable[[], Awaitable[Any]]) -> Counter[str]:
        await con.execute("SELECT pg_stat_statements_reset()")
        await work()
        counted: Counter[str] = Counter()
        for row in await con.fetch(COUNTED):
            query = " ".join(row["query"].split())
            if query.upper() in PINGS or query.startswith(NOT_THE_CALL):
                continue
            if any(mark in query for mark in OTHER_MARKS):
                continue
            counted[query] += row["calls"]
        return counted

    async def count(work: Callable[[], Awaitable[Any]]) -> Counter[str]:
        runs = [await count_once(work) for _ in range(RUNS)]
        return min(runs, key=lambda counted: sum(counted.values()))

    try:
        yield count
    finally:
        await con.close()


def described(counted: Counter[str]) -> str:
    return "\n".join(f"{n} x {query[:90]}" for query, n in sorted(counted.items()))


def key_inserts(counted: Counter[str]) -> int:
    """Statements that insert a remembered reply (as a call of the function that makes it, or
    an insert that need not start the statement)."""
    return sum(n for query, n in counted.items() if any(k in query for k in KEY_INSERTS))


class TestStatements:
    async def test_fork_none(
        self,
        stack: Stack,
        statements: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Counter[str]]],
    ) -> None:
        """A Fork NONE without request_id runs 10 statements, 2 of them key inserts."""
        root = await stack.root(system_prompt="be brief")
        await stack.fork(root.id, "warm")  # the pools' connections and prepared statements
        counted = await statements(lambda: stack.fork(root.id, "counted"))
        assert key_inserts(counted) == 2, described(counted)
        assert sum(counted.values()) == FORK_NONE_STATEMENTS, described(counted)

    async def test_fork_none_with_request_id(
        self,
        stack: Stack,
        statements: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Counter[str]]],
    ) -> None:
        """A client request_id adds only the up-front lookup: still 2 key inserts (no
        storage key beside the remembered session)."""
        root = await stack.root(system_prompt="be brief")
        await stack.fork(root.id, "warm", request_id="warm")
        ids = iter(range(RUNS))
        counted = await statements(
            lambda: stack.fork(root.id, "counted", request_id=f"c{next(ids)}")
        )
        assert key_inserts(counted) == 2, described(counted)
        assert sum(counted.values()) == FORK_NONE_STATEMENTS + 1, described(counted)

    async def test_create_root(
        self,
        stack: Stack,
        statements: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Counter[str]]],
    ) -> None:
        """A CreateRoot with a system prompt runs 9 statements, 2 of them key inserts."""
        await stack.root(system_prompt="warm")
        counted = await statements(lambda: stack.root(system_prompt="be brief"))
        assert key_inserts(counted) == 2, described(counted)
        assert sum(counted.values()) == CREATE_ROOT_STATEMENTS, described(counted)
