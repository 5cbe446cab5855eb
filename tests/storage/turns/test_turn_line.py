"""BeginTurn's busy policies (DESIGN §4.2, issue #38): the line of ENQUEUE turns kept in the
database, and INTERRUPT's take-over recorded so that the stopped turn learns of it.

Time moves through the database (a ticket's expiry written into the past), never by sleeping.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_metadata, error_info_reason, field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import ASSISTANT, TOOL, rec, rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
ENQUEUE = common_pb2.BUSY_POLICY_ENQUEUE
INTERRUPT = common_pb2.BUSY_POLICY_INTERRUPT
ROLLBACK = common_pb2.BUSY_POLICY_ROLLBACK

TICKETS = """
SELECT waiter, ticket FROM turn_waiters WHERE space_id = $1 AND session_id = $2 ORDER BY ticket
"""
EXPIRE_TICKET = """
UPDATE turn_waiters SET expires_at = now() - interval '1 second'
WHERE space_id = $1 AND session_id = $2 AND waiter = $3
"""
EVENTS = "SELECT kind, session_id FROM space_events WHERE space_id = $1 ORDER BY position"


def window() -> storage_pb2.TurnWindow:
    return storage_pb2.TurnWindow(window_tokens=1_000_000)


async def begin(
    stub: Stub, space: TestSpace, sid: uuid.UUID, **fields: Any
) -> storage_pb2.BeginTurnResponse:
    """BeginTurn with a window (the whole turn), as the gateway asks it."""
    reply: storage_pb2.BeginTurnResponse = await stub.BeginTurn(
        storage_pb2.BeginTurnRequest(
            space_id=space.sid, session_id=str(sid), ttl_s=30, window=window(), **fields
        )
    )
    return reply


async def wait(
    stub: Stub,
    space: TestSpace,
    sid: uuid.UUID,
    waiter: uuid.UUID,
    *,
    max_waiters: int = 10,
    continuation: bool = False,
) -> storage_pb2.BeginTurnResponse:
    """BeginTurn with ENQUEUE for the waiting call `waiter`."""
    return await begin(
        stub,
        space,
        sid,
        busy=ENQUEUE,
        waiter=str(waiter),
        max_waiters=max_waiters,
        continuation=continuation,
    )


async def release(stub: Stub, space: TestSpace, sid: uuid.UUID, token: str) -> bool:
    reply = await stub.ReleaseTurn(
        storage_pb2.ReleaseTurnRequest(space_id=space.sid, session_id=str(sid), token=token)
    )
    return bool(reply.released)


async def leave(stub: Stub, space: TestSpace, sid: uuid.UUID, waiter: uuid.UUID) -> bool:
    reply = await stub.LeaveTurnQueue(
        storage_pb2.LeaveTurnQueueRequest(
            space_id=space.sid, session_id=str(sid), waiter=str(waiter)
        )
    )
    return bool(reply.left)


async def tickets(pool: asyncpg.Pool, space: TestSpace, sid: uuid.UUID) -> list[uuid.UUID]:
    """The waiters holding tickets for the session, in ticket order."""
    return [r["waiter"] for r in await pool.fetch(TICKETS, space.id, sid)]


def calls(*ids: str) -> list[common_pb2.ToolCall]:
    return [common_pb2.ToolCall(id=i, name="lookup", arguments_json=json.dumps({})) for i in ids]


class TestEnqueue:
    async def test_a_free_session_starts_at_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """ENQUEUE on a free session with nobody waiting takes the lease at once, no ticket."""
        sid = await make_session()
        reply = await wait(stub, space, sid, uuid.uuid4())
        assert reply.token and not reply.HasField("queued")
        assert await tickets(pool, space, sid) == []

    async def test_waiters_start_in_arrival_order(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """While a turn runs, ENQUEUE callers take tickets in arrival order; once it ends only
        the first in line may start (the second keeps waiting, one place from the front)."""
        sid = await make_session()
        running = await begin(stub, space, sid)
        first, second = uuid.uuid4(), uuid.uuid4()
        queued = [await wait(stub, space, sid, w) for w in (first, second)]
        assert [(q.token, q.queued.ahead) for q in queued] == [("", 0), ("", 1)]
        assert await tickets(pool, space, sid) == [first, second]
        assert await release(stub, space, sid, running.token)
        again = await wait(stub, space, sid, second)
        assert not again.token and again.queued.ahead == 1
        started = await wait(stub, space, sid, first)
        assert started.token and started.turn.session.id == str(sid)
        assert await tickets(pool, space, sid) == [second]
        assert (await wait(stub, space, sid, second)).queued.ahead == 0

    async def test_reject_is_refused_while_turns_wait(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """With the lease free but a ticket waiting, a REJECT Send is TURN_IN_PROGRESS (the
        waiter came first); a REJECT continuation (SubmitToolResults) is not held back."""
        sid = await make_session()
        running = await begin(stub, space, sid)
        await wait(stub, space, sid, uuid.uuid4())
        await release(stub, space, sid, running.token)
        error = await rpc_error(begin(stub, space, sid))
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "TURN_IN_PROGRESS"
        assert "queued" in (error.details() or "")
        # In the words its clients take (busy="enqueue"): it said "the ENQUEUE policy".
        assert "or set busy to enqueue (wait in line)" in (error.details() or "")
        assert (await begin(stub, space, sid, continuation=True)).token

    async def test_reject_while_a_turn_runs_names_the_policies(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A REJECT turn refused by a running one says which policy refused it and which
        `busy` values wait for the session or take it over."""
        sid = await make_session()
        await begin(stub, space, sid)
        error = await rpc_error(begin(stub, space, sid))
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "TURN_IN_PROGRESS"
        details = error.details() or ""
        # In the words its clients take (busy="enqueue", --busy enqueue), not the enum's.
        assert "(busy policy reject)" in details
        assert "set busy to enqueue (wait in line) or interrupt" in details

    async def test_the_cap_refuses_one_more(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Past max_waiters live tickets a new one is RESOURCE_EXHAUSTED TURN_QUEUE_FULL naming
        the cap, and nothing is written; a waiter already in line still renews."""
        sid = await make_session()
        await begin(stub, space, sid)
        waiting = [uuid.uuid4(), uuid.uuid4()]
        for waiter in waiting:
            await wait(stub, space, sid, waiter, max_waiters=2)
        error = await rpc_error(wait(stub, space, sid, uuid.uuid4(), max_waiters=2))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info_reason(error) == "TURN_QUEUE_FULL"
        assert (error.details() or "").startswith(f"2 turns already wait for session {sid},")
        assert "(2)" in (error.details() or "")
        # How many wait, for the gateway's message (which names its own setting).
        assert error_info_metadata(error) == {"session_id": str(sid), "waiting": "2"}
        assert await tickets(pool, space, sid) == waiting
        assert (await wait(stub, space, sid, waiting[1], max_waiters=2)).queued.ahead == 1

    async def test_a_cap_of_one_says_one_turn(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """With one ticket allowed and taken, the refusal speaks of one turn, in the singular."""
        sid = await make_session()
        await begin(stub, space, sid)
        await wait(stub, space, sid, uuid.uuid4(), max_waiters=1)
        error = await rpc_error(wait(stub, space, sid, uuid.uuid4(), max_waiters=1))
        assert error_info_reason(error) == "TURN_QUEUE_FULL"
        assert (error.details() or "").startswith(
            f"1 turn already waits for session {sid}, the most allowed (1);"
        )

    async def test_an_expired_ticket_loses_its_place(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A ticket nobody renewed (its gateway died) is dropped when the line is read: the
        next waiter becomes first and starts once the lease is free."""
        sid = await make_session()
        running = await begin(stub, space, sid)
        dead, alive = uuid.uuid4(), uuid.uuid4()
        await wait(stub, space, sid, dead)
        await wait(stub, space, sid, alive)
        await pool.execute(EXPIRE_TICKET, space.id, sid, dead)
        await release(stub, space, sid, running.token)
        assert (await wait(stub, space, sid, alive)).token
        assert await tickets(pool, space, sid) == []

    async def test_a_waiter_that_leaves_frees_its_place(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """LeaveTurnQueue removes the ticket and writes TURN_RELEASED (the next looks again);
        leaving twice answers left false."""
        sid = await make_session()
        running = await begin(stub, space, sid)
        gone, next_ = uuid.uuid4(), uuid.uuid4()
        await wait(stub, space, sid, gone)
        await wait(stub, space, sid, next_)
        assert await leave(stub, space, sid, gone)
        assert not await leave(stub, space, sid, gone)
        assert await tickets(pool, space, sid) == [next_]
        events = [(r["kind"], r["session_id"]) for r in await pool.fetch(EVENTS, space.id)]
        assert events == [("turn_released", sid)]
        await release(stub, space, sid, running.token)
        assert (await wait(stub, space, sid, next_)).token

    async def test_pending_tool_calls_hold_sends_back(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A session waiting for client tool results keeps a queued Send waiting even when it
        is free and first (it would drop the group); a queued continuation goes ahead of it,
        and once the group is answered the Send starts."""
        sid = await make_session()
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid,
                session_id=str(sid),
                records=[rec("hi"), rec("", ASSISTANT, tool_calls=calls("c1", "c2"))],
            )
        )
        sender, submitter = uuid.uuid4(), uuid.uuid4()
        assert (await wait(stub, space, sid, sender)).queued.ahead == 0
        submitted = await wait(stub, space, sid, submitter, continuation=True)
        assert submitted.token
        answers = [rec(f"r{i}", TOOL, tool_call_id=f"c{i}") for i in (1, 2)]
        op = storage_pb2.Operation
        await stub.Transact(
            storage_pb2.TransactRequest(
                space_id=space.sid,
                operations=[
                    op(append_records=op.AppendRecordsOp(session_id=str(sid), records=answers)),
                    op(release_turn=op.ReleaseTurnOp(session_id=str(sid), token=submitted.token)),
                ],
            )
        )
        assert (await wait(stub, space, sid, sender)).token

    async def test_an_answered_group_does_not_hold_a_send(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Only an unanswered call holds the line: a group whose calls all have tool records
        (here partly a built-in's answer) lets a queued Send start."""
        sid = await make_session()
        records = [
            rec("hi"),
            rec("", ASSISTANT, tool_calls=calls("c1")),
            rec("done", TOOL, tool_call_id="c1"),
        ]
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid, session_id=str(sid), records=records
            )
        )
        assert (await wait(stub, space, sid, uuid.uuid4())).token

    async def test_a_remembered_reply_answers_a_waiter(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A queued call whose request_id has a remembered reply (its first attempt committed)
        is answered with it, and its ticket leaves the line."""
        sid = await make_session()
        await begin(stub, space, sid)
        waiter = uuid.uuid4()
        key = {"scope": "gateway.Send", "request_id": "r-1"}
        await begin(stub, space, sid, busy=ENQUEUE, waiter=str(waiter), max_waiters=5, **key)
        op = storage_pb2.Operation
        remember = op.RememberResultOp(
            scope="gateway.Send", request_id="r-1", request_hash=b"h", response=b"turn"
        )
        await stub.Transact(
            storage_pb2.TransactRequest(
                space_id=space.sid, operations=[op(remember_result=remember)]
            )
        )
        reply = await begin(
            stub, space, sid, busy=ENQUEUE, waiter=str(waiter), max_waiters=5, **key
        )
        assert reply.remembered.response == b"turn" and not reply.token
        assert await tickets(pool, space, sid) == []

    async def test_leave_of_another_space_is_not_found(
        self, stub: Stub, other_space: TestSpace, make_session: MakeSession
    ) -> None:
        """LeaveTurnQueue on a session of another space is NOT_FOUND."""
        sid = await make_session()
        error = await rpc_error(leave(stub, other_space, sid, uuid.uuid4()))
        assert error.code() is grpc.StatusCode.NOT_FOUND


class TestInterrupt:
    @pytest.mark.parametrize("policy", [INTERRUPT, ROLLBACK], ids=["interrupt", "rollback"])
    async def test_takes_over_and_is_recorded(
        self, policy: int, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """INTERRUPT (and ROLLBACK, the same) takes a live lease over at once and answers the
        token it stopped; that token's renewal answers interrupted (not renewed), its release
        is a no-op, and the new lease holds."""
        sid = await make_session()
        old = await begin(stub, space, sid)
        new = await begin(stub, space, sid, busy=policy)
        assert new.token and new.interrupted_token == old.token
        renewal = await stub.RenewTurn(
            storage_pb2.RenewTurnRequest(
                space_id=space.sid, session_id=str(sid), token=old.token, ttl_s=30
            )
        )
        assert not renewal.renewed and renewal.interrupted
        assert not await release(stub, space, sid, old.token)
        kept = await stub.RenewTurn(
            storage_pb2.RenewTurnRequest(
                space_id=space.sid, session_id=str(sid), token=new.token, ttl_s=30
            )
        )
        assert kept.renewed and not kept.interrupted

    async def test_every_turn_of_a_chain_of_take_overs_is_told(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A chain of INTERRUPTs (each stopping the one before, faster than a renewal) tells
        every stopped turn it was interrupted, not only the last: the first's renewal came
        after the second was stopped too, and storage kept only the latest token (its
        lease looked lapsed: CONCURRENT_MODIFICATION). The newest 16 stopped are kept."""
        sid = await make_session()
        tokens = [(await begin(stub, space, sid)).token]
        for _ in range(17):  # 17 turns stopped
            tokens.append((await begin(stub, space, sid, busy=INTERRUPT)).token)
        for token in tokens[1:-1]:
            renewal = await stub.RenewTurn(
                storage_pb2.RenewTurnRequest(
                    space_id=space.sid, session_id=str(sid), token=token, ttl_s=30
                )
            )
            assert not renewal.renewed and renewal.interrupted
        oldest = await stub.RenewTurn(
            storage_pb2.RenewTurnRequest(
                space_id=space.sid, session_id=str(sid), token=tokens[0], ttl_s=30
            )
        )
        assert not oldest.renewed and not oldest.interrupted  # the 17th back is forgotten

    async def test_on_a_free_session_it_is_a_plain_turn(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """INTERRUPT with no live lease stops nothing (no interrupted token)."""
        sid = await make_session()
        reply = await begin(stub, space, sid, busy=INTERRUPT)
        assert reply.token and reply.interrupted_token == ""


class TestEvents:
    async def test_release_writes_turn_released(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """ReleaseTurn of a live lease writes TURN_RELEASED; a no-op release writes none."""
        sid = await make_session()
        lease = await begin(stub, space, sid)
        assert await release(stub, space, sid, lease.token)
        assert not await release(stub, space, sid, lease.token)
        events = [(r["kind"], r["session_id"]) for r in await pool.fetch(EVENTS, space.id)]
        assert events == [("turn_released", sid)]


class TestValidation:
    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            pytest.param({"busy": 99}, "busy", id="unknown-policy"),
            pytest.param({"busy": ENQUEUE, "max_waiters": 3}, "waiter", id="no-waiter"),
            pytest.param(
                {"busy": ENQUEUE, "waiter": "x", "max_waiters": 3}, "waiter", id="bad-waiter"
            ),
            pytest.param(
                {"busy": ENQUEUE, "waiter": str(uuid.uuid4()), "max_waiters": 0},
                "max_waiters",
                id="no-cap",
            ),
        ],
    )
    async def test_bad_fields_are_named(
        self,
        fields: dict[str, Any],
        field: str,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
    ) -> None:
        """A bad busy policy, waiter or cap is INVALID_ARGUMENT naming it; nothing is taken."""
        sid = await make_session()
        error = await rpc_error(begin(stub, space, sid, **fields))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(error)]
        assert (
            await pool.fetchval(
                "SELECT turn_token FROM sessions WHERE space_id = $1 AND id = $2", space.id, sid
            )
            is None
        )

    async def test_an_unknown_policy_lists_the_values(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A busy number no BusyPolicy has names the values (it said "is not a BusyPolicy
        value: 99")."""
        error = await rpc_error(begin(stub, space, await make_session(), busy=99))
        assert [(v.field, v.description) for v in field_violations(error)] == [
            ("busy", "must be one of reject, enqueue, interrupt, rollback, got 99")
        ]

    async def test_a_policy_needs_a_window(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """ENQUEUE or INTERRUPT without a window (a bare lease) is INVALID_ARGUMENT on busy."""
        sid = await make_session()
        request = storage_pb2.BeginTurnRequest(
            space_id=space.sid, session_id=str(sid), ttl_s=30, busy=INTERRUPT
        )
        error = await rpc_error(stub.BeginTurn(request))
        assert [v.field for v in field_violations(error)] == ["busy"]
