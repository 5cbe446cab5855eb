"""The migrated schema is ready for Citus: keys, indexes and foreign keys carry space_id."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.distribution import catalog
from tests.distribution.plan import CitusPlan, read_plan

pytestmark = pytest.mark.sql


@pytest.fixture(name="con")
async def _con(direct_database_url: str) -> AsyncIterator[asyncpg.Connection]:
    # Direct: a lone connection with asyncpg's statement cache, as migrations use.
    con = await asyncpg.connect(direct_database_url)
    try:
        yield con
    finally:
        await con.close()


@pytest.fixture(name="plan", scope="session")
def _plan() -> CitusPlan:
    return read_plan()


class TestCatalog:
    async def test_every_table_is_planned(self, con: asyncpg.Connection, plan: CitusPlan) -> None:
        """Each table is distributed by space_id or a reference table in docs/scaling.md."""
        assert await catalog.unplanned_tables(con, plan) == []
        assert plan.reference == {
            "principals",
            "spaces",
            "api_keys",
            "schema_migrations",
            "token_keys",
        }

    async def test_tenant_tables_carry_space_id(
        self, con: asyncpg.Connection, plan: CitusPlan
    ) -> None:
        """Every distributed table has a NOT NULL space_id and is co-located with sessions."""
        assert await catalog.tenant_tables_without_space_id(con, plan) == []

    async def test_indexes_lead_with_space_id(
        self, con: asyncpg.Connection, plan: CitusPlan
    ) -> None:
        """Primary keys, unique constraints and indexes start with space_id, exceptions aside."""
        assert await catalog.indexes_not_led_by_space_id(con, plan) == []
        assert await catalog.missing_exceptions(con) == []

    async def test_foreign_keys_stay_in_a_space(
        self, con: asyncpg.Connection, plan: CitusPlan
    ) -> None:
        """Foreign keys between tenant tables hold space_id on both sides and never SET NULL."""
        assert await catalog.foreign_keys_across_tenants(con, plan) == []

    async def test_no_sequence(self, con: asyncpg.Connection) -> None:
        """No sequence, identity or serial column gives order across tenants."""
        assert await catalog.sequences(con) == []


class TestChecksCatchViolations:
    @pytest.mark.plain_postgres(
        "writes the violations the checks must catch into the schema, and Citus refuses one "
        "of them itself (a SET NULL key holding the distribution column)"
    )
    async def test_each_kind_is_reported(self, con: asyncpg.Connection, plan: CitusPlan) -> None:
        """An unlisted table, an index without space_id, a sequence, a SET NULL key: all caught."""
        tx = con.transaction()
        await tx.start()
        try:
            # One statement a call: Citus sends DDL on to the workers as the text it came
            # in, which a worker refuses when it holds several statements.
            await con.execute(
                "CREATE TABLE outbox (space_id uuid NOT NULL, seq bigserial, PRIMARY KEY (seq))"
            )
            await con.execute("CREATE INDEX records_by_seq ON records (seq)")
            await con.execute(
                "ALTER TABLE session_refs ADD CONSTRAINT refs_set_null"
                " FOREIGN KEY (space_id, to_id) REFERENCES sessions (space_id, id)"
                " ON DELETE SET NULL (to_id)"
            )
            found = await catalog.every_violation(con, plan)
        finally:
            await tx.rollback()
        assert found == [
            "outbox: neither distributed nor a reference table in docs/scaling.md",
            "records_by_seq on records starts with seq",
            "refs_set_null: SET NULL on a key holding space_id",
            "outbox.seq",
            "outbox_seq_seq",
        ]
