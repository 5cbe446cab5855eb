"""A tenant key's identity (WhoAmI) reads its one space, not every space of its principal.

Its statement joined the principal's spaces on `($2 IS NULL OR s.id = $2)`: a plan that
knows no parameter (a pooler's long-lived connection, `force_generic_plan`) cannot probe
the space's key for that, and read every space of the principal (by `spaces`' unique
(principal_id, name)), filtering: 201 tuples of `spaces` beside 200 spaces, 2,001 beside
2,000. A tenant key's identity is a statement of its own now: 1 and 2. Tuples read are
counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid

import pytest

from stello.auth import KeyStore, Principal
from tests.support.fresh import GENERIC_PLAN_READS, FreshDatabase

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

# $3 more spaces of principal $1, named after the $2 before them.
SPACES = """
INSERT INTO spaces (id, principal_id, name)
SELECT gen_random_uuid(), $1, 'more ' || ($2 + i) FROM generate_series(1, $3) i
"""


async def test_a_tenant_identity_reads_the_same_beside_200_or_2000_spaces(
    fresh: FreshDatabase,
) -> None:
    """A tenant key's identity, its principal holding 200 spaces more, then 2,000, reads a
    few tuples of `spaces`, and names its one space."""
    async with fresh.pool.acquire() as con:
        principal_id = await con.fetchval(
            "SELECT principal_id FROM spaces WHERE id = $1", fresh.space.id
        )
    tenant = Principal(uuid.uuid4(), principal_id, "tenant", fresh.space.id)
    keys = KeyStore(fresh.pool)
    reads = []
    for before, more in ((0, 200), (200, 1_800)):
        async with fresh.pool.acquire() as con:
            await con.execute(SPACES, principal_id, before, more)
            await con.execute("ANALYZE spaces")
        read, identity = await fresh.reads("spaces", lambda: keys.identity(tenant), warm=True)
        assert [space for space, _name in identity.spaces] == [fresh.space.id]
        reads.append(read)
    small, large = reads
    assert large <= 10, f"{small} tuples of spaces beside 200 spaces, {large} beside 2,000"
