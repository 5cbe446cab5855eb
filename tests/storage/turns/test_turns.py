"""BeginTurn, RenewTurn and ReleaseTurn: one live lease per session, with a TTL (DESIGN §4.2)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import asyncpg
import grpc
import pytest

from stello.errors import error_info_reason
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.conftest import StubFor
from tests.storage.helpers import rpc_error, state
from tests.support.fixtures import MakeSession, TestSpace
from tests.tree.conftest import hide_while

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
T = TypeVar("T")


async def begin(
    stub: Stub, space: TestSpace, session_id: str, ttl_s: int = 30
) -> storage_pb2.BeginTurnResponse:
    reply: storage_pb2.BeginTurnResponse = await stub.BeginTurn(
        storage_pb2.BeginTurnRequest(space_id=space.sid, session_id=session_id, ttl_s=ttl_s)
    )
    return reply


async def release(stub: Stub, space: TestSpace, session_id: str, token: str) -> bool:
    reply = await stub.ReleaseTurn(
        storage_pb2.ReleaseTurnRequest(space_id=space.sid, session_id=session_id, token=token)
    )
    return bool(reply.released)


async def renew(
    stub: Stub, space: TestSpace, session_id: str, token: str, ttl_s: int = 60
) -> storage_pb2.RenewTurnResponse:
    reply: storage_pb2.RenewTurnResponse = await stub.RenewTurn(
        storage_pb2.RenewTurnRequest(
            space_id=space.sid, session_id=session_id, token=token, ttl_s=ttl_s
        )
    )
    return reply


EXPIRE = (
    "UPDATE sessions SET turn_expires_at = now() - interval '1 second' "
    "WHERE space_id = $1 AND id = $2"
)
EXPIRY = "SELECT turn_expires_at FROM sessions WHERE space_id = $1 AND id = $2"


async def started(call: Awaitable[T]) -> asyncio.Task[T]:
    """`call` as a task (`hide_while`'s `start`)."""
    return asyncio.ensure_future(call)


class TestBeginTurn:
    async def test_a_begin_that_waited_for_the_delete_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A BeginTurn that waits on the row while a delete hides the session answers
        NOT_FOUND once the delete commits, not TURN_IN_PROGRESS (its snapshot, taken before
        the delete committed, still saw the session)."""
        sid = await make_session()
        call = await hide_while(
            pool, pool, space.id, sid, lambda: started(begin(stub, space, str(sid)))
        )
        err = await rpc_error(call)
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_lease_has_token_and_expiry(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A lease answers a UUID token and an expiry ttl_s from now."""
        sid = str(await make_session())
        lease = await begin(stub, space, sid, ttl_s=60)
        uuid.UUID(lease.token)
        expected = datetime.now(UTC) + timedelta(seconds=60)
        assert abs(lease.expires_at.ToDatetime(tzinfo=UTC) - expected) < timedelta(seconds=5)

    async def test_second_begin_while_live_is_aborted(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A second BeginTurn while a lease lives is ABORTED TURN_IN_PROGRESS."""
        sid = str(await make_session())
        await begin(stub, space, sid)
        err = await rpc_error(begin(stub, space, sid))
        assert err.code() == grpc.StatusCode.ABORTED
        assert error_info_reason(err) == "TURN_IN_PROGRESS"

    async def test_begin_after_release_succeeds(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """After ReleaseTurn a new lease is granted with a new token."""
        sid = str(await make_session())
        first = await begin(stub, space, sid)
        assert await release(stub, space, sid, first.token)
        second = await begin(stub, space, sid)
        assert second.token != first.token

    async def test_begin_after_expiry_succeeds(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Once the TTL has passed the old lease is replaced silently."""
        sid = str(await make_session())
        first = await begin(stub, space, sid, ttl_s=1)
        await asyncio.sleep(1.2)
        second = await begin(stub, space, sid)
        assert second.token != first.token
        assert not await release(stub, space, sid, first.token)

    async def test_concurrent_begins_grant_one_lease(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Of ten simultaneous BeginTurn calls exactly one gets the lease."""
        sid = str(await make_session())
        outcomes = await asyncio.gather(
            *(begin(stub, space, sid) for _ in range(10)), return_exceptions=True
        )
        granted = [o for o in outcomes if isinstance(o, storage_pb2.BeginTurnResponse)]
        refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
        assert len(granted) == 1
        assert {e.code() for e in refused} == {grpc.StatusCode.ABORTED}

    async def test_allowed_on_provisional(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A provisional session can take a lease (it is a write)."""
        sid = str(await make_session(provisional=True))
        assert (await begin(stub, space, sid)).token

    async def test_unknown_session_is_not_found(self, stub: Stub, space: TestSpace) -> None:
        """BeginTurn on a session that does not exist is NOT_FOUND."""
        err = await rpc_error(begin(stub, space, str(uuid.uuid4())))
        assert err.code() == grpc.StatusCode.NOT_FOUND


class TestReleaseTurn:
    async def test_release_is_idempotent(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The first release ends the lease; a second answers released=false."""
        sid = str(await make_session())
        lease = await begin(stub, space, sid)
        assert await release(stub, space, sid, lease.token)
        assert not await release(stub, space, sid, lease.token)

    @pytest.mark.parametrize("token", [str(uuid.uuid4()), "not-a-token"], ids=["other", "opaque"])
    async def test_foreign_token_leaves_the_lease(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, token: str
    ) -> None:
        """A token that is not the current one releases nothing and the lease stays live."""
        sid = str(await make_session())
        await begin(stub, space, sid)
        assert not await release(stub, space, sid, token)
        err = await rpc_error(begin(stub, space, sid))
        assert err.code() == grpc.StatusCode.ABORTED


class TestRenewTurn:
    async def test_renew_extends_the_live_lease(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """RenewTurn moves the expiry to ttl_s from now, keeps the lease and writes nothing else."""
        sid = await make_session()
        lease = await begin(stub, space, str(sid), ttl_s=5)
        before = await state(pool, space.id, sid)
        reply = await renew(stub, space, str(sid), lease.token, ttl_s=60)
        assert reply.renewed
        expected = datetime.now(UTC) + timedelta(seconds=60)
        assert abs(reply.expires_at.ToDatetime(tzinfo=UTC) - expected) < timedelta(seconds=5)
        assert await pool.fetchval(EXPIRY, space.id, sid) == reply.expires_at.ToDatetime(tzinfo=UTC)
        assert await state(pool, space.id, sid) == before
        err = await rpc_error(begin(stub, space, str(sid)))
        assert error_info_reason(err) == "TURN_IN_PROGRESS"

    async def test_an_expired_lease_nobody_took_is_renewed(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A lease past its expiry that no other turn took is its holder's to renew."""
        sid = await make_session()
        lease = await begin(stub, space, str(sid))
        await pool.execute(EXPIRE, space.id, sid)
        assert (await renew(stub, space, str(sid), lease.token)).renewed
        err = await rpc_error(begin(stub, space, str(sid)))
        assert error_info_reason(err) == "TURN_IN_PROGRESS"

    async def test_a_lease_taken_over_is_not_renewed(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Once another turn took the expired lease, the old token renews nothing."""
        sid = await make_session()
        first = await begin(stub, space, str(sid))
        await pool.execute(EXPIRE, space.id, sid)
        second = await begin(stub, space, str(sid), ttl_s=30)
        expiry = await pool.fetchval(EXPIRY, space.id, sid)
        reply = await renew(stub, space, str(sid), first.token)
        assert not reply.renewed
        assert not reply.HasField("expires_at")
        assert await pool.fetchval(EXPIRY, space.id, sid) == expiry
        assert (await renew(stub, space, str(sid), second.token)).renewed

    async def test_a_renewal_that_waited_for_the_delete_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A renewal that waits on the row while a delete hides the session answers NOT_FOUND
        once the delete commits: the turn learns its session is gone. It answered "not
        renewed" (the statement's snapshot, taken before the delete committed, still saw the
        session), which the gateway takes for another turn's: stop 71's CI failed on it."""
        sid = await make_session()
        lease = await begin(stub, space, str(sid))
        call = await hide_while(
            pool, pool, space.id, sid, lambda: started(renew(stub, space, str(sid), lease.token))
        )
        err = await rpc_error(call)
        assert err.code() == grpc.StatusCode.NOT_FOUND

    @pytest.mark.parametrize("token", [None, "not-a-token"], ids=["released", "opaque"])
    async def test_no_lease_to_renew(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, token: str | None
    ) -> None:
        """A released or opaque token renews nothing, and the session stays free."""
        sid = str(await make_session())
        lease = await begin(stub, space, sid)
        assert await release(stub, space, sid, lease.token)
        assert not (await renew(stub, space, sid, token or lease.token)).renewed
        assert (await begin(stub, space, sid)).token

    async def test_unknown_session_is_not_found(self, stub: Stub, space: TestSpace) -> None:
        """RenewTurn on a session that does not exist is NOT_FOUND."""
        err = await rpc_error(renew(stub, space, str(uuid.uuid4()), str(uuid.uuid4())))
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_other_space_with_the_real_token_is_not_found(
        self,
        stub_for: StubFor,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
    ) -> None:
        """Another space's session is NOT_FOUND even with its lease's own token, and its lease
        keeps its expiry."""
        sid = await make_session(space_id=other_space.id)
        lease = await begin(stub_for(other_space.key), other_space, str(sid), ttl_s=30)
        expiry = await pool.fetchval(EXPIRY, other_space.id, sid)
        request = storage_pb2.RenewTurnRequest(
            space_id=space.sid, session_id=str(sid), token=lease.token, ttl_s=600
        )
        err = await rpc_error(stub_for(space.key).RenewTurn(request))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert await pool.fetchval(EXPIRY, other_space.id, sid) == expiry
