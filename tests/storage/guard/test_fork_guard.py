"""ClaimFork and ReleaseForkClaim: the fork guard's counter in the session row (spec §6.7)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest

from stello.errors import field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


async def claim(
    stub: Stub, space: TestSpace, session_id: uuid.UUID, min_turns: int = 3, cooldown: int = 5
) -> storage_pb2.ClaimForkResponse:
    """ClaimFork with the reference's defaults (3 and 5)."""
    reply: storage_pb2.ClaimForkResponse = await stub.ClaimFork(
        storage_pb2.ClaimForkRequest(
            space_id=space.sid,
            session_id=str(session_id),
            min_turns=min_turns,
            cooldown_turns=cooldown,
        )
    )
    return reply


async def set_turns(pool: asyncpg.Pool, space: TestSpace, session_id: uuid.UUID, n: int) -> None:
    """Give the session `n` committed turns."""
    await pool.execute(
        "UPDATE sessions SET turn_count = $3 WHERE space_id = $1 AND id = $2",
        space.id,
        session_id,
        n,
    )


def last_fork(reply: storage_pb2.ClaimForkResponse) -> int | None:
    """The last granted claim's turn the reply names."""
    return reply.last_fork_turn if reply.HasField("last_fork_turn") else None


class TestClaims:
    async def test_min_turns_then_cooldown(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """2 turns of 3 refused, 3 granted; a claim at 5 refuses 7 and grants 10 (§6.7 1-4)."""
        session = await make_session()
        await set_turns(pool, space, session, 2)
        refused = await claim(stub, space, session)
        assert (refused.granted, refused.turn_count, last_fork(refused)) == (False, 2, None)
        await set_turns(pool, space, session, 3)
        assert (await claim(stub, space, session)).granted
        await set_turns(pool, space, session, 5)
        assert not (await claim(stub, space, session)).granted  # 5 - 3 < 5
        await set_turns(pool, space, session, 8)
        granted = await claim(stub, space, session)
        assert (granted.granted, last_fork(granted)) == (True, 3)
        await set_turns(pool, space, session, 12)
        cooling = await claim(stub, space, session)
        assert (cooling.granted, cooling.turn_count, last_fork(cooling)) == (False, 12, 8)
        await set_turns(pool, space, session, 13)
        assert (await claim(stub, space, session)).granted

    async def test_zero_bounds_always_grant(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """With no minimum and no cooldown every claim is granted, at turn 0 too."""
        session = await make_session()
        replies = [await claim(stub, space, session, 0, 0) for _ in range(3)]
        assert [r.granted for r in replies] == [True, True, True]

    async def test_sessions_are_guarded_apart(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A claim on the root leaves its child's cooldown alone (§6.7 item 9)."""
        root = await make_session()
        child = await make_session(parent=root)
        for session in (root, child):
            await set_turns(pool, space, session, 3)
        assert (await claim(stub, space, root)).granted
        assert (await claim(stub, space, child)).granted

    async def test_concurrent_claims_grant_one(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Ten concurrent claims at one turn count with a cooldown: exactly one is granted."""
        session = await make_session()
        await set_turns(pool, space, session, 3)
        replies = await asyncio.gather(*(claim(stub, space, session) for _ in range(10)))
        assert sum(r.granted for r in replies) == 1
        stored = await pool.fetchval(
            "SELECT last_fork_turn FROM sessions WHERE space_id = $1 AND id = $2",
            space.id,
            session,
        )
        assert stored == 3


class TestRelease:
    async def test_a_given_back_claim_lets_the_next_one_through(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Releasing a granted claim restores the previous turn; a stale release is a no-op."""
        session = await make_session()
        await set_turns(pool, space, session, 3)
        first = await claim(stub, space, session)
        request = storage_pb2.ReleaseForkClaimRequest(
            space_id=space.sid, session_id=str(session), claimed_turn=first.turn_count
        )
        assert (await stub.ReleaseForkClaim(request)).released
        second = await claim(stub, space, session)
        assert (second.granted, last_fork(second)) == (True, None)
        stale = storage_pb2.ReleaseForkClaimRequest(
            space_id=space.sid, session_id=str(session), claimed_turn=99, previous_fork_turn=1
        )
        assert not (await stub.ReleaseForkClaim(stale)).released
        assert not (await claim(stub, space, session)).granted


class TestRefusals:
    async def test_unknown_provisional_and_foreign_sessions_are_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, other_space: TestSpace
    ) -> None:
        """Claims on an unknown, a provisional or another space's session are NOT_FOUND."""
        hidden = await make_session(provisional=True)
        elsewhere = await make_session(space_id=other_space.id)
        for session in (uuid.uuid4(), hidden, elsewhere):
            error = await rpc_error(claim(stub, space, session))
            assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_a_release_on_a_provisional_or_deleted_session_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A release on a provisional session, or one DeleteSubtree hid (being erased), answers
        NOT_FOUND and writes nothing to its row (it set the last fork turn of both)."""
        provisional = await make_session(provisional=True)
        erasing = await make_session()
        await pool.execute(
            "UPDATE sessions SET last_fork_turn = 4,"
            " provisional_until = CASE WHEN id = $3 THEN 'infinity' ELSE provisional_until END"
            " WHERE space_id = $1 AND id = ANY ($2::uuid[])",
            space.id, [provisional, erasing], erasing,
        )  # fmt: skip
        for session in (provisional, erasing):
            request = storage_pb2.ReleaseForkClaimRequest(
                space_id=space.sid, session_id=str(session), claimed_turn=4, previous_fork_turn=1
            )
            error = await rpc_error(stub.ReleaseForkClaim(request))
            assert error.code() is grpc.StatusCode.NOT_FOUND
        turns = await pool.fetch(
            "SELECT last_fork_turn FROM sessions WHERE space_id = $1 AND id = ANY ($2::uuid[])",
            space.id,
            [provisional, erasing],
        )
        assert [r["last_fork_turn"] for r in turns] == [4, 4]

    async def test_negative_bounds_are_invalid(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Negative bounds and turns are INVALID_ARGUMENT naming each field."""
        session = await make_session()
        error = await rpc_error(claim(stub, space, session, -1, -2))
        assert [v.field for v in field_violations(error)] == ["min_turns", "cooldown_turns"]
        error = await rpc_error(
            stub.ReleaseForkClaim(
                storage_pb2.ReleaseForkClaimRequest(
                    space_id=space.sid,
                    session_id=str(session),
                    claimed_turn=-1,
                    previous_fork_turn=-1,
                )
            )
        )
        assert [v.field for v in field_violations(error)] == ["claimed_turn", "previous_fork_turn"]
