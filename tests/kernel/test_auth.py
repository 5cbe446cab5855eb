"""The key store's principal cache: a hit needs no SQL, the TTL bounds the revocation lag."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.auth import KeyStore
from tests.support.fixtures import TestSpace
from tests.tree.seed import chain, seed_topology

pytestmark = pytest.mark.sql

REVOKE_IN_SQL = "UPDATE api_keys SET revoked_at = now() WHERE id = $1"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestPrincipalCache:
    async def test_cached_for_the_ttl(self, pool: asyncpg.Pool, space: TestSpace) -> None:
        """A key revoked behind the cache's back still resolves until its TTL ends, then not."""
        clock = Clock()
        keys = KeyStore(pool, cache_ttl_s=5, clock=clock)
        first = await keys.resolve(space.key)
        assert first is not None and first.space_id == space.id
        await pool.execute(REVOKE_IN_SQL, space.key_id)
        clock.now += 4.9
        assert await keys.resolve(space.key) == first  # a hit: no lookup saw the revocation
        clock.now += 0.1
        assert await keys.resolve(space.key) is None

    async def test_revoke_takes_effect_at_once(self, pool: asyncpg.Pool, space: TestSpace) -> None:
        """Revoking through the store drops its cached principals: the next call fails."""
        keys = KeyStore(pool, cache_ttl_s=5, clock=Clock())
        assert await keys.resolve(space.key) is not None
        assert await keys.revoke(space.key_id)
        assert await keys.resolve(space.key) is None

    async def test_keys_are_cached_apart(
        self, pool: asyncpg.Pool, space: TestSpace, other_space: TestSpace
    ) -> None:
        """Each cached key answers its own principal; an unknown key stays unknown."""
        keys = KeyStore(pool, cache_ttl_s=5, clock=Clock())
        for _ in range(2):
            mine, theirs = await keys.resolve(space.key), await keys.resolve(other_space.key)
            assert mine is not None and mine.space_id == space.id
            assert theirs is not None and theirs.space_id == other_space.id
            assert await keys.resolve(space.key + "x") is None

    async def test_ttl_zero_never_caches(self, pool: asyncpg.Pool, space: TestSpace) -> None:
        """With STELLO_AUTH_CACHE_TTL_S=0 every call looks the key up (revocation at once)."""
        keys = KeyStore(pool, cache_ttl_s=0, clock=Clock())
        assert await keys.resolve(space.key) is not None
        await pool.execute(REVOKE_IN_SQL, space.key_id)
        assert await keys.resolve(space.key) is None


class TestSpaces:
    async def test_listed_with_their_session_counts(
        self, pool: asyncpg.Pool, space: TestSpace, other_space: TestSpace
    ) -> None:
        """`stello spaces list`'s listing: each space once with its sessions counted, 0 for
        one without any. On Citus it failed ("correlated subqueries are not supported when
        the FROM clause contains a reference table"): the test runs in the Citus pass."""
        await seed_topology(pool, space.id, chain(3))
        listed = {info.id: info for info in await KeyStore(pool).list_spaces()}
        assert (listed[space.id].sessions, listed[other_space.id].sessions) == (3, 0)


class TestDeleteSpace:
    async def test_the_owner_goes_with_its_last_space(self, pool: asyncpg.Pool) -> None:
        """A space's erasure takes its owner (principal: a name an operator gave a tenant)
        once it owns no space and no key (explore14 F4); not before."""
        keys = KeyStore(pool, cache_ttl_s=0)
        owner = f"owner-{uuid.uuid4().hex}"
        first = await keys.create_key(space=f"a-{owner}", principal=owner)
        second = await keys.create_key(space=f"b-{owner}", principal=owner)
        assert first.space_id is not None and second.space_id is not None
        named = "SELECT count(*) FROM principals WHERE name = $1"
        assert await keys.delete_space(first.space_id) == first.space_id
        assert await pool.fetchval(named, owner) == 1  # it still owns the second space
        assert await keys.delete_space(second.space_id) == second.space_id
        assert await pool.fetchval(named, owner) == 0
        admin = await keys.create_key(space=None, scope="admin", principal=owner)
        third = await keys.create_key(space=f"c-{owner}", principal=owner)
        assert third.space_id is not None and admin.space_id is None
        await keys.delete_space(third.space_id)
        assert await pool.fetchval(named, owner) == 1  # its admin key keeps it
