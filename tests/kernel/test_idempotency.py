"""request_id idempotency in the kernel: claim and remember against a real database."""

from __future__ import annotations

import asyncio
from typing import cast

import asyncpg
import pytest

from stello.errors import AlreadyExists
from stello.reasons import REQUEST_ID_REUSED
from stello.stored import idempotency
from tests.support.fixtures import TestSpace
from tests.support.history import activity_view

pytestmark = pytest.mark.sql

SCOPE = "test.kernel"

# claim and remember take an asyncpg.Connection; the pool's PoolConnectionProxy forwards every
# Connection method, but asyncpg-stubs do not type it as one: hence the ignore[arg-type]s.


async def claim_and_remember(
    pool: asyncpg.Pool, space: TestSpace, request_id: str, request_hash: bytes, response: bytes
) -> bytes | None:
    """One whole idempotent unit of work: the earlier response, or None after storing ours."""
    async with pool.acquire() as con, con.transaction():
        earlier = await idempotency.claim(con, space.id, SCOPE, request_id, request_hash)  # type: ignore[arg-type]
        if earlier is None:
            await idempotency.remember(con, space.id, SCOPE, request_id, request_hash, response)  # type: ignore[arg-type]
        return earlier


async def claim_while_held(
    pool: asyncpg.Pool, space: TestSpace, *, commit: bool
) -> tuple[asyncio.Task[None], asyncio.Task[bytes | None]]:
    """A first transaction claims "r"; a second call claims it meanwhile and must wait.

    The first then stores b"first" and commits (`commit`) or fails and rolls back; the
    tasks of both are returned once the first has ended its transaction's work.
    """
    claimed = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with pool.acquire() as con, con.transaction():
            assert await idempotency.claim(con, space.id, SCOPE, "r", b"h") is None  # type: ignore[arg-type]
            claimed.set()
            await release.wait()
            if not commit:
                raise RuntimeError("the work failed")
            await idempotency.remember(con, space.id, SCOPE, "r", b"h", b"first")  # type: ignore[arg-type]

    holder = asyncio.create_task(first())
    await claimed.wait()
    second = asyncio.create_task(claim_and_remember(pool, space, "r", b"h", b"second"))
    await until_waiting_on_the_key(pool)  # blocked on the first transaction's key row
    assert not second.done()
    release.set()
    return holder, second


class TestClaim:
    async def test_first_call_claims_and_a_retry_gets_the_stored_response(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """The first claim is ours; after it commits, the same key answers its response."""
        assert await claim_and_remember(pool, space, "r", b"h", b"first") is None
        assert await claim_and_remember(pool, space, "r", b"h", b"second") == b"first"

    async def test_different_request_is_refused(self, pool: asyncpg.Pool, space: TestSpace) -> None:
        """The same key with another request hash is REQUEST_ID_REUSED and changes nothing."""
        await claim_and_remember(pool, space, "r", b"h", b"first")
        with pytest.raises(AlreadyExists) as caught:
            await claim_and_remember(pool, space, "r", b"other", b"x")
        assert caught.value.reason == REQUEST_ID_REUSED
        assert await claim_and_remember(pool, space, "r", b"h", b"y") == b"first"

    async def test_rolled_back_claim_leaves_the_key_free(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """Work that fails rolls its claim back: the next call is first again."""
        with pytest.raises(RuntimeError):
            async with pool.acquire() as con, con.transaction():
                assert await idempotency.claim(con, space.id, SCOPE, "r", b"h") is None  # type: ignore[arg-type]
                raise RuntimeError("the work failed")
        assert await claim_and_remember(pool, space, "r", b"h", b"after") is None
        assert await claim_and_remember(pool, space, "r", b"h", b"again") == b"after"

    async def test_expired_key_is_claimed_afresh(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A key older than the TTL counts as unused, even for a different request."""
        await claim_and_remember(pool, space, "r", b"h", b"old")
        await pool.execute(
            "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' "
            "WHERE space_id = $1 AND scope = $2",
            space.id,
            SCOPE,
        )
        assert await claim_and_remember(pool, space, "r", b"new hash", b"new") is None
        assert await claim_and_remember(pool, space, "r", b"new hash", b"x") == b"new"

    async def test_concurrent_call_waits_for_the_first_and_gets_its_response(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """While one transaction holds the key, a second claim waits, then sees its answer."""
        holder, second = await claim_while_held(pool, space, commit=True)
        await holder
        assert await second == b"first"

    async def test_concurrent_call_claims_when_the_first_rolls_back(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A waiting claim whose holder rolls back becomes the first call itself."""
        holder, second = await claim_while_held(pool, space, commit=False)
        with pytest.raises(RuntimeError):
            await holder
        assert await second is None
        assert await claim_and_remember(pool, space, "r", b"h", b"x") == b"second"

    async def test_keys_are_per_space(
        self, pool: asyncpg.Pool, space: TestSpace, other_space: TestSpace
    ) -> None:
        """One request_id in two spaces is two keys."""
        await claim_and_remember(pool, space, "r", b"h", b"mine")
        assert await claim_and_remember(pool, other_space, "r", b"other", b"theirs") is None


class Keys(idempotency.KeyStatements):
    """The key statements on one connection (as a repository mixes them in)."""

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con


async def work_then_key(
    pool: asyncpg.Pool, space: TestSpace, request_hash: bytes, response: bytes
) -> bytes | None:
    """One work-first unit under key "w": None after storing ours, else the answer."""
    try:
        async with pool.acquire() as con, con.transaction():
            await Keys(con).remember_or_answer(space.id, SCOPE, "w", request_hash, response)  # type: ignore[arg-type]
    except idempotency.Answered as answered:
        return answered.response
    return None


# On Citus the insert waits on the key's row in a worker's shard
# (idempotency_keys_<shard>): citus_stat_activity shows every node's backends.
# The insert runs in stello_remember_new (migration 0034): a backend shows the call, a
# Citus worker the insert into the key's shard.
WAITING_ON_THE_KEY = """
SELECT count(*) FROM {activity}
WHERE datname = current_database() AND wait_event_type = 'Lock'
  AND (query LIKE '%INSERT INTO %idempotency_keys%' OR query LIKE '%stello_remember_new(%')
"""


async def waiting_on_the_key(pool: asyncpg.Pool) -> int:
    """Backends of the database waiting on a lock in an insert of a key (any node)."""
    return int(await pool.fetchval(WAITING_ON_THE_KEY.format(activity=await activity_view(pool))))


async def until_waiting_on_the_key(pool: asyncpg.Pool) -> None:
    """Until a backend waits on a lock in an insert of a key (`waiting_on_the_key`)."""
    async with asyncio.timeout(10):  # a database condition: polled (no event can tell it)
        while True:
            if await waiting_on_the_key(pool):
                break
            await asyncio.sleep(0.01)


async def key_while_held(
    pool: asyncpg.Pool, space: TestSpace, *, commit: bool
) -> tuple[asyncio.Task[None], asyncio.Task[bytes | None]]:
    """A first unit stores "w" and holds its transaction; a second one's insert waits on the
    key's row (seen in pg_stat_activity); then the first commits or rolls back."""
    stored = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with pool.acquire() as con, con.transaction():
            await Keys(con).remember_or_answer(space.id, SCOPE, "w", b"h", b"first")  # type: ignore[arg-type]
            stored.set()
            await release.wait()
            if not commit:
                raise RuntimeError("the work failed")

    holder = asyncio.create_task(first())
    await stored.wait()
    second = asyncio.create_task(work_then_key(pool, space, b"h", b"second"))
    await until_waiting_on_the_key(pool)
    assert not second.done()
    release.set()
    return holder, second


class TestRememberNew:
    async def test_new_key_is_stored_then_answers_a_retry(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """The first unit stores its response; a retry is answered with it (Answered)."""
        assert await work_then_key(pool, space, b"h", b"first") is None
        assert await work_then_key(pool, space, b"h", b"again") == b"first"

    async def test_different_request_is_refused(self, pool: asyncpg.Pool, space: TestSpace) -> None:
        """A live key with another request hash is REQUEST_ID_REUSED, the entry unchanged."""
        await work_then_key(pool, space, b"h", b"first")
        with pytest.raises(AlreadyExists) as caught:
            await work_then_key(pool, space, b"other", b"x")
        assert caught.value.reason == REQUEST_ID_REUSED
        assert await work_then_key(pool, space, b"h", b"y") == b"first"

    async def test_expired_key_is_replaced(self, pool: asyncpg.Pool, space: TestSpace) -> None:
        """A key past the TTL is taken afresh, even by another request."""
        await work_then_key(pool, space, b"h", b"old")
        await pool.execute(
            "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' "
            "WHERE space_id = $1 AND scope = $2",
            space.id,
            SCOPE,
        )
        assert await work_then_key(pool, space, b"new hash", b"new") is None
        assert await work_then_key(pool, space, b"new hash", b"x") == b"new"

    async def test_concurrent_unit_waits_and_is_answered(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A second unit's insert waits for the first's transaction, then is answered."""
        holder, second = await key_while_held(pool, space, commit=True)
        await holder
        assert await second == b"first"

    async def test_concurrent_unit_stores_when_the_first_rolls_back(
        self, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A waiting insert whose holder rolls back stores its own response."""
        holder, second = await key_while_held(pool, space, commit=False)
        with pytest.raises(RuntimeError):
            await holder
        assert await second is None
        assert await work_then_key(pool, space, b"h", b"x") == b"second"


async def test_the_purge_of_expired_keys_is_bounded_for_a_backlog(pool: asyncpg.Pool) -> None:
    """The purge deletes every key expired since its last round, which after a long stop is
    a backlog: its DELETE gets the bulk bound (10 minutes), not the maintenance batches'
    60 s, under which a backlog would time out every round and never shrink."""
    async with pool.acquire() as con, con.transaction():
        await idempotency.purge_expired(cast(asyncpg.Connection, con))
        assert await con.fetchval("SHOW statement_timeout") == "10min"
