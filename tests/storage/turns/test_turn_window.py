"""BeginTurn with a window: the turn in one round trip, bounded by the budget (DESIGN §4.3)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.rules.tokens import record_tokens
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import ASSISTANT, TOOL, rec, rpc_error
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.history import RowReads, seed_history

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
SCOPE = "gateway.Send"


async def begin(
    stub: Stub,
    space: TestSpace,
    sid: uuid.UUID | str,
    window: int = 1_000_000,
    reserve: int = 0,
    **fields: Any,
) -> storage_pb2.BeginTurnResponse:
    reply: storage_pb2.BeginTurnResponse = await stub.BeginTurn(
        storage_pb2.BeginTurnRequest(
            space_id=space.sid,
            session_id=str(sid),
            ttl_s=30,
            window=storage_pb2.TurnWindow(window_tokens=window, reserve_tokens=reserve),
            **fields,
        )
    )
    return reply


async def append(stub: Stub, space: TestSpace, sid: uuid.UUID, records: list[Any]) -> None:
    await stub.AppendRecords(
        storage_pb2.AppendRecordsRequest(space_id=space.sid, session_id=str(sid), records=records)
    )


async def release(stub: Stub, space: TestSpace, sid: uuid.UUID, token: str) -> None:
    await stub.ReleaseTurn(
        storage_pb2.ReleaseTurnRequest(space_id=space.sid, session_id=str(sid), token=token)
    )


def seqs(reply: storage_pb2.BeginTurnResponse) -> list[int]:
    return [r.seq for r in reply.turn.records]


def sized(n: int, tokens: int) -> common_pb2.Record:
    """A user record of exactly `tokens` estimated tokens."""
    return rec(f"{n:04d}".ljust(tokens * 4, "."))


async def put_cache(stub: Stub, space: TestSpace, sid: uuid.UUID, summary: str, seq: int) -> None:
    cache = storage_pb2.CompressionCache(summary=summary, covered_until_seq=seq)
    await stub.PutCompressionCache(
        storage_pb2.PutCompressionCacheRequest(space_id=space.sid, session_id=str(sid), cache=cache)
    )


class TestTurnState:
    async def test_answers_what_the_turn_needs(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Meta, last seq, slots, cache, the whole tail after the cache and its estimate."""
        sid = await make_session(label="plans")
        await append(stub, space, sid, [sized(i, 10) for i in range(6)])
        for name, content in (("PutSystemPrompt", "be brief"), ("PutInsight", "hint")):
            request = getattr(storage_pb2, f"{name}Request")
            await getattr(stub, name)(
                request(space_id=space.sid, session_id=str(sid), content=content)
            )
        await put_cache(stub, space, sid, "so far", 2)
        reply = await begin(stub, space, sid)
        turn = reply.turn
        assert uuid.UUID(reply.token) and reply.HasField("expires_at")
        assert (turn.session.id, turn.session.label, turn.last_seq) == (str(sid), "plans", 6)
        assert (turn.system_prompt, turn.insight) == ("be brief", "hint")
        assert (turn.cache.summary, turn.cache.covered_until_seq) == ("so far", 2)
        assert seqs(reply) == [3, 4, 5, 6]
        assert (turn.tail_tokens, turn.first_tail_seq) == (40, 3)

    async def test_empty_session(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A session without records answers no window, no tail and no slots."""
        reply = await begin(stub, space, await make_session())
        turn = reply.turn
        assert reply.token and list(turn.records) == [] and turn.last_seq == 0
        assert not turn.HasField("system_prompt") and not turn.HasField("cache")
        assert (turn.tail_tokens, turn.first_tail_seq) == (0, 0)

    async def test_lease_is_taken(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The turn holds the lease: a second one is TURN_IN_PROGRESS until it is released."""
        sid = await make_session()
        first = await begin(stub, space, sid)
        err = await rpc_error(begin(stub, space, sid))
        assert err.code() == grpc.StatusCode.ABORTED
        assert error_info_reason(err) == "TURN_IN_PROGRESS"
        await release(stub, space, sid, first.token)
        assert (await begin(stub, space, sid)).token


class TestRefusals:
    async def test_remembered_entry_comes_first(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A remembered request_id is answered before anything, even for an unknown session,
        and takes no lease."""
        sid = await make_session()
        remember = Op.RememberResultOp(
            scope=SCOPE, request_id="r1", request_hash=b"h", response=b"stored"
        )
        await stub.Transact(
            storage_pb2.TransactRequest(
                space_id=space.sid, operations=[Op(remember_result=remember)]
            )
        )
        for target in (sid, uuid.uuid4()):
            reply = await begin(stub, space, target, scope=SCOPE, request_id="r1")
            assert (reply.remembered.request_hash, reply.remembered.response) == (b"h", b"stored")
            assert not reply.token and not reply.HasField("turn")
        assert (await begin(stub, space, sid, scope=SCOPE, request_id="r2")).token

    async def test_provisional_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A turn on a provisional session is NOT_FOUND (a plain lease is still allowed)."""
        sid = await make_session(provisional=True)
        err = await rpc_error(begin(stub, space, sid))
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_unknown_and_foreign_are_not_found(
        self, stub: Stub, space: TestSpace, other_space: TestSpace, make_session: MakeSession
    ) -> None:
        """A session of another space, or none at all, is NOT_FOUND."""
        foreign = await make_session(space_id=other_space.id)
        for target in (foreign, uuid.uuid4()):
            err = await rpc_error(begin(stub, space, target))
            assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_archived_takes_no_lease(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """An archived session answers its status and no token; no lease is left behind."""
        sid = await make_session(status="archived")
        reply = await begin(stub, space, sid)
        assert not reply.token
        assert reply.turn.session.status == common_pb2.SESSION_STATUS_ARCHIVED
        plain = await stub.BeginTurn(
            storage_pb2.BeginTurnRequest(space_id=space.sid, session_id=str(sid), ttl_s=5)
        )
        assert plain.token

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            pytest.param({"window": 0}, "window.window_tokens", id="window"),
            pytest.param({"reserve": -1}, "window.reserve_tokens", id="reserve"),
            pytest.param({"request_id": "r"}, "scope", id="scope"),
            pytest.param({"request_id": "r", "scope": "storage.X"}, "scope", id="reserved"),
        ],
    )
    async def test_bad_arguments(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        fields: dict[str, Any],
        field: str,
    ) -> None:
        """A bad window or key is INVALID_ARGUMENT naming the field; no lease is taken."""
        sid = await make_session()
        err = await rpc_error(begin(stub, space, sid, **fields))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(err)]
        assert (await begin(stub, space, sid)).token


class TestBudget:
    async def test_newest_records_within_the_budget(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The window is the newest records whose estimates fit window - prefix - reserve."""
        sid = await make_session()
        await append(stub, space, sid, [sized(i, 10) for i in range(10)])
        await stub.PutSystemPrompt(
            storage_pb2.PutSystemPromptRequest(
                space_id=space.sid, session_id=str(sid), content="p" * 40
            )
        )
        reply = await begin(stub, space, sid, window=75, reserve=15)  # 75 - 10 - 15 = 50
        assert seqs(reply) == [6, 7, 8, 9, 10]
        assert (reply.turn.tail_tokens, reply.turn.first_tail_seq) == (100, 1)

    async def test_budget_counts_the_summary(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The summary's estimate comes off the budget; records it covers never count."""
        sid = await make_session()
        await append(stub, space, sid, [sized(i, 10) for i in range(10)])
        await put_cache(stub, space, sid, "s" * 80, 3)  # 20 tokens
        reply = await begin(stub, space, sid, window=50)
        assert seqs(reply) == [8, 9, 10]
        assert reply.turn.tail_tokens == 70

    async def test_newest_record_even_over_budget(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The newest record is always there, whatever the budget."""
        sid = await make_session()
        await append(stub, space, sid, [sized(0, 10), sized(1, 500)])
        first = await begin(stub, space, sid, window=20)
        assert seqs(first) == [2]
        await release(stub, space, sid, first.token)
        assert seqs(await begin(stub, space, sid, window=1)) == [2]

    async def test_starts_on_a_tool_group_boundary(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A window that would start on tool results starts at the call they answer."""
        sid = await make_session()
        calls = [common_pb2.ToolCall(id=f"c{i}", name="t", arguments_json="") for i in range(2)]
        await append(
            stub,
            space,
            sid,
            [
                sized(0, 10),
                rec("", ASSISTANT, tool_calls=calls),
                rec("r" * 40, TOOL, tool_call_id="c0"),
                rec("r" * 40, TOOL, tool_call_id="c1"),
                sized(4, 10),
            ],
        )
        assert seqs(await begin(stub, space, sid, window=20)) == [2, 3, 4, 5]

    async def test_trailing_open_group_is_whole(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A trailing tool group, answered in part, is whole even over the budget."""
        sid = await make_session()
        calls = [common_pb2.ToolCall(id=f"c{i}", name="t", arguments_json="") for i in range(3)]
        await append(
            stub,
            space,
            sid,
            [
                *(sized(i, 10) for i in range(3)),
                rec("calling", ASSISTANT, tool_calls=calls),
                rec("x" * 400, TOOL, tool_call_id="c0"),
                rec("y" * 400, TOOL, tool_call_id="c1"),
            ],
        )
        assert seqs(await begin(stub, space, sid, window=5)) == [4, 5, 6]

    async def test_group_reaching_before_the_cache(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The trailing group is whole even when the cache covers its call."""
        sid = await make_session()
        calls = [common_pb2.ToolCall(id="c0", name="t", arguments_json="")]
        await append(
            stub,
            space,
            sid,
            [sized(0, 10), rec("", ASSISTANT, tool_calls=calls), rec("r", TOOL, tool_call_id="c0")],
        )
        await put_cache(stub, space, sid, "s", 2)
        reply = await begin(stub, space, sid)
        assert seqs(reply) == [2, 3]
        assert (reply.turn.tail_tokens, reply.turn.first_tail_seq) == (1, 3)


class TestHistoryLength:
    @pytest.mark.slow
    @pytest.mark.plain_postgres(
        "counts the rows read in the statistics of the database it connects to; on Citus "
        "the coordinator reads none, the workers' shards do"
    )
    async def test_reads_only_the_window_of_10000_records(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
        direct_database_url: str,
    ) -> None:
        """On a 10,000-record session a turn of a 2,000-token budget reads about its 40
        records, counted in tuples PostgreSQL read (not time, not rows answered). A read
        that grows with the history shows at this size as it did at 100,000 (which took
        ten seconds of COPY in each of two CI passes): one tuple per record is 10,000
        against a bound of 180."""
        sid = await make_session()
        async with pool.acquire() as con:
            await seed_history(con, space.id, sid, 10_000)
        await put_cache(stub, space, sid, "old summary", 10)
        counter = await asyncpg.connect(direct_database_url)
        try:
            reads = RowReads(counter, "records")
            before = await reads.count()
            reply = await begin(stub, space, sid, window=2_000)
            read = await reads.count() - before
        finally:
            await counter.close()
        window = seqs(reply)
        assert window == list(range(10_000 - len(window) + 1, 10_001))
        assert sum(record_tokens(r.content) for r in reply.turn.records) <= 2_000 - 3
        assert reply.turn.tail_tokens == 50 * (10_000 - 10)
        assert 30 <= len(window) <= 40
        assert read <= 4 * len(window) + 20, f"read {read} tuples for a {len(window)}-record window"
