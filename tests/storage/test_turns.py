"""BeginTurn and ReleaseTurn: one live lease per session, with a TTL (DESIGN §4.2)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from stello.errors import error_info_reason
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


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


class TestBeginTurn:
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
