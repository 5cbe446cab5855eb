"""Every statement the services run pins each tenant table by space_id (pg_stat_statements).

The three services run on a database of their own while every RPC they serve
is called (the test fails if one is not); PostgreSQL records each statement,
and each is parsed: a tenant table that no space_id equality pins in its scope
(docs/scaling.md) fails the test, unless the statement is a listed
cross-space maintenance path.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import asyncpg
import pytest
from pglast.parser import fingerprint

from stello.stored import idempotency
from storage_service.jobs import repository as jobs_repository
from storage_service.search import backfill_repository
from tests.distribution.plan import read_plan
from tests.distribution.services import (
    Services,
    drive_every_rpc,
    not_called,
    recorded_services,
)
from tests.distribution.tenancy_sql import unpinned
from tests.support.database import create_test_database, drop_test_database
from tree_service.erasure.job import ERASE_SPACES
from tree_service.sweep.repository import SWEEP_DUE

# Statements allowed to span spaces, by their fingerprint (constants ignored).
MAINTENANCE = {
    fingerprint(SWEEP_DUE): "the sweep's dry run lists due sessions of every space",
    fingerprint(idempotency.PURGE): "request_id keys past 24 h go in every space",
    fingerprint(ERASE_SPACES): "the erasure job finds a space with deleted sessions",
    fingerprint(backfill_repository.PENDING): (
        "the search backfill looks for spaces whose pass is not finished"
    ),
    fingerprint(jobs_repository.ORPHANED_EVERYWHERE): (
        "the runner's takeover (an admin key) finds jobs left without a gateway in every space"
    ),
}

# Savepoints (a trim's lock passes, asyncpg's nested transactions) are recorded with
# their names as parameters (`SAVEPOINT $1`), which no parser reads; they touch no table.
RECORDED = """
SELECT s.query, s.calls
FROM pg_stat_statements s
JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = $1
  AND s.query !~* '^\\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)\\s'
"""


@pytest.fixture(name="recorded", scope="module")
async def _recorded(admin_dsn: str) -> AsyncIterator[tuple[Services, list[str]]]:
    """A pass over every RPC on a fresh database; the services and the statements recorded."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        preload = await admin.fetchval("SHOW shared_preload_libraries")
        if "pg_stat_statements" not in preload:
            if os.environ.get("STELLO_TEST_DATABASE_URL"):
                pytest.skip("this server does not preload pg_stat_statements")
            pytest.fail("the embedded test server must preload pg_stat_statements")
        await admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        dsn = await create_test_database(admin_dsn)
        name = dsn.partition("?")[0].rpartition("/")[2]
        try:
            dbid = await admin.fetchval("SELECT oid FROM pg_database WHERE datname = $1", name)
            await admin.execute("SELECT pg_stat_statements_reset(0, $1, 0)", dbid)
            evicted = await admin.fetchval("SELECT dealloc FROM pg_stat_statements_info")
            async with recorded_services(dsn) as services:
                await drive_every_rpc(services)
                rows = await admin.fetch(RECORDED, name)
                yield services, [r["query"] for r in rows]
            after = await admin.fetchval("SELECT dealloc FROM pg_stat_statements_info")
            assert after == evicted, "pg_stat_statements evicted entries: raise its max"
        finally:
            await drop_test_database(admin_dsn, dsn)
    finally:
        await admin.close()


class TestStatements:
    def test_every_rpc_was_called(self, recorded: tuple[Services, list[str]]) -> None:
        """The pass called each RPC of storage, tree and gateway at least once."""
        services, _ = recorded
        assert not_called(services) == []

    def test_every_statement_pins_space_id(self, recorded: tuple[Services, list[str]]) -> None:
        """No recorded statement reads or writes a tenant table without a space_id equality."""
        _, queries = recorded
        tenant = read_plan().distributed
        assert len(queries) > 50
        offending = {
            query: refs
            for query in queries
            if fingerprint(query) not in MAINTENANCE and (refs := unpinned(query, tenant))
        }
        assert not offending, "\n\n".join(f"{refs}:\n{q}" for q, refs in offending.items())

    def test_maintenance_list_is_current(self, recorded: tuple[Services, list[str]]) -> None:
        """Each listed cross-space statement ran and still spans spaces (the list stays true)."""
        _, queries = recorded
        tenant = read_plan().distributed
        seen = {fingerprint(q): q for q in queries}
        for print_, reason in MAINTENANCE.items():
            assert print_ in seen, f"not run: {reason}"
            assert unpinned(seen[print_], tenant), f"pins space_id now, drop it: {reason}"
