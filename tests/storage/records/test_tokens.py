"""Token accounting (DESIGN §4.3): each record's estimate and the cumulative, on every write."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stello.common.v1 import common_pb2
from stello.rules.tokens import estimate_tokens, record_tokens
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import ASSISTANT, TOOL, rec
from tests.storage.tokens import token_problems
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
# What PostgreSQL text can hold: no NUL, no lone surrogate.
TEXT_CHARS = st.characters(exclude_characters="\x00", exclude_categories=["Cs"])

TEXTS = [
    "",
    "a",
    "abcd",
    "abcde",
    "你好，世界",
    "emoji 🎉 and ü",
    "x" * 4001,
]


def call(name: str, arguments: str) -> common_pb2.ToolCall:
    return common_pb2.ToolCall(id=f"c-{name}", name=name, arguments_json=arguments)


async def append(
    stub: Stub, space: TestSpace, sid: uuid.UUID, records: list[common_pb2.Record]
) -> storage_pb2.AppendRecordsResponse:
    reply: storage_pb2.AppendRecordsResponse = await stub.AppendRecords(
        storage_pb2.AppendRecordsRequest(space_id=space.sid, session_id=str(sid), records=records)
    )
    return reply


async def transact(stub: Stub, space: TestSpace, ops: list[storage_pb2.Operation]) -> None:
    await stub.Transact(storage_pb2.TransactRequest(space_id=space.sid, operations=ops))


def append_op(sid: uuid.UUID, records: list[common_pb2.Record]) -> storage_pb2.Operation:
    return Op(append_records=Op.AppendRecordsOp(session_id=str(sid), records=records))


class TestEstimate:
    def test_python_rule(self) -> None:
        """ceil(code points / 4) of the content plus the tool calls' names and arguments."""
        assert estimate_tokens("") == 0
        assert estimate_tokens("abcde") == 2
        assert estimate_tokens("你好你好你") == 2
        assert record_tokens("ab", [("tool", '{"a":1}')]) == 4  # 2 + 4 + 7 = 13 code points

    @settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        content=st.text(TEXT_CHARS, max_size=60),
        calls=st.lists(
            st.tuples(
                st.text(TEXT_CHARS, max_size=10),
                st.text(TEXT_CHARS, max_size=20),
            ),
            max_size=3,
        ),
    )
    async def test_sql_function_agrees(
        self, pool: asyncpg.Pool, content: str, calls: list[tuple[str, str]]
    ) -> None:
        """stello_record_tokens (migration 0006) computes exactly what stello.rules.tokens does."""
        stored = [{"id": "c", "name": n, "arguments_json": a} for n, a in calls] or None
        async with pool.acquire() as con:
            got = await con.fetchval("SELECT stello_record_tokens($1, $2::jsonb)", content, stored)
        assert got == record_tokens(content, calls)


class TestEveryWrite:
    async def test_appends_of_every_shape(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Single and batched appends of text, CJK, emoji and tool calls count exactly."""
        sid = await make_session()
        await append(stub, space, sid, [rec(t) for t in TEXTS])
        await append(
            stub,
            space,
            sid,
            [
                rec("", ASSISTANT, tool_calls=[call("search", '{"q":"天气"}'), call("x", "")]),
                rec("sunny", TOOL, tool_call_id="c-search"),
            ],
        )
        await append(stub, space, sid, [rec("one more")])
        assert await token_problems(pool, space.id, sid) == []

    async def test_transact_batches(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Several appends in one Transact, on two sessions, continue each one's cumulative."""
        first, second = await make_session(), await make_session()
        await append(stub, space, first, [rec("before")])
        await transact(
            stub,
            space,
            [
                append_op(first, [rec("a" * 9), rec("中文内容")]),
                append_op(second, [rec("b" * 17)]),
                append_op(first, [rec("", ASSISTANT, tool_calls=[call("t", '{"k":"v"}')])]),
            ],
        )
        assert await token_problems(pool, space.id, first) == []
        assert await token_problems(pool, space.id, second) == []

    async def test_trims_and_cache_puts(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A trim keeps the cumulative of what remains; later appends and cache puts continue it."""
        sid = await make_session()
        await append(stub, space, sid, [rec(t) for t in TEXTS])
        await stub.TrimRecords(
            storage_pb2.TrimRecordsRequest(space_id=space.sid, session_id=str(sid), keep_recent=3)
        )
        cache = storage_pb2.CompressionCache(summary="s", covered_until_seq=6)
        await stub.PutCompressionCache(
            storage_pb2.PutCompressionCacheRequest(
                space_id=space.sid, session_id=str(sid), cache=cache
            )
        )
        await transact(
            stub,
            space,
            [
                append_op(sid, [rec("after the trim")]),
                Op(trim_records=Op.TrimRecordsOp(session_id=str(sid), keep_recent=2)),
                append_op(sid, [rec("last")]),
            ],
        )
        assert await token_problems(pool, space.id, sid, trimmed=True) == []

    async def test_fifty_concurrent_appends(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """50 parallel appends of different sizes leave one exact cumulative chain."""
        sid = await make_session()
        await asyncio.gather(
            *(append(stub, space, sid, [rec("w" * i), rec("字" * (i % 7))]) for i in range(50))
        )
        assert await token_problems(pool, space.id, sid) == []

    async def test_recount_restores_what_appends_wrote(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """stello_recount_tokens (the migration's backfill, used by seeders) rewrites the
        columns exactly as the appends had written them."""
        sid = await make_session()
        await append(stub, space, sid, [rec(t) for t in TEXTS])
        async with pool.acquire() as con:
            before = await con.fetch(
                "SELECT seq, token_estimate, token_cumulative FROM records"
                " WHERE space_id = $1 AND session_id = $2 ORDER BY seq",
                space.id,
                sid,
            )
            await con.execute(
                "UPDATE records SET token_estimate = 0, token_cumulative = 0"
                " WHERE space_id = $1 AND session_id = $2",
                space.id,
                sid,
            )
            await con.execute("SELECT stello_recount_tokens($1, $2)", space.id, sid)
            after = await con.fetch(
                "SELECT seq, token_estimate, token_cumulative FROM records"
                " WHERE space_id = $1 AND session_id = $2 ORDER BY seq",
                space.id,
                sid,
            )
        assert [tuple(r) for r in after] == [tuple(r) for r in before]
        assert await token_problems(pool, space.id, sid) == []
