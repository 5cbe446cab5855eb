"""BeginTurn answers the shared memory index and the skill allow-list (DESIGN §4.3, §4.5)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from stello.errors import field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rec, rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


async def begin(
    stub: Stub,
    space: TestSpace,
    sid: uuid.UUID,
    *,
    window: int = 1_000_000,
    index: storage_pb2.MemoryIndexWindow | None = None,
) -> storage_pb2.TurnState:
    """BeginTurn with a window (and the index caps when given); the turn."""
    request = storage_pb2.BeginTurnRequest(
        space_id=space.sid,
        session_id=str(sid),
        ttl_s=30,
        window=storage_pb2.TurnWindow(window_tokens=window),
    )
    if index is not None:
        request.memory_index.CopyFrom(index)
    reply: storage_pb2.BeginTurnResponse = await stub.BeginTurn(request)
    await stub.ReleaseTurn(
        storage_pb2.ReleaseTurnRequest(space_id=space.sid, session_id=str(sid), token=reply.token)
    )
    return reply.turn


async def remember(stub: Stub, space: TestSpace, slug: str, summary: str) -> None:
    """Upsert one shared memory entry."""
    await stub.UpsertSharedMemoryEntry(
        storage_pb2.UpsertSharedMemoryEntryRequest(
            space_id=space.sid, slug=slug, summary=summary, body="b"
        )
    )


def caps(entries: int = 50, tokens: int = 10_000, overhead: int = 0) -> Any:
    """Index caps."""
    return storage_pb2.MemoryIndexWindow(
        max_entries=entries, max_tokens=tokens, overhead_tokens=overhead
    )


class TestIndex:
    async def test_not_read_unless_asked_and_empty_when_none(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Without caps no index; with caps and no entries, none and a count of 0."""
        sid = await make_session()
        assert list((await begin(stub, space, sid, index=caps())).memory_index) == []
        await remember(stub, space, "a", "sa")
        plain = await begin(stub, space, sid)
        assert (list(plain.memory_index), plain.memory_total) == ([], 0)
        asked = await begin(stub, space, sid, index=caps())
        assert [(e.slug, e.summary, e.HasField("body")) for e in asked.memory_index] == [
            ("a", "sa", False)
        ]
        assert asked.memory_total == 1

    async def test_capped_in_entries_and_tokens_with_the_count(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The first entries in insertion order, cut by count and by the lines' estimate."""
        sid = await make_session()
        for i in range(5):
            await remember(stub, space, f"e{i}", "x" * 30)  # "- e0: " + 30 + "\n": 10 tokens
        by_count = await begin(stub, space, sid, index=caps(entries=3))
        assert ([e.slug for e in by_count.memory_index], by_count.memory_total) == (
            ["e0", "e1", "e2"],
            5,
        )
        by_tokens = await begin(stub, space, sid, index=caps(tokens=25))
        assert [e.slug for e in by_tokens.memory_index] == ["e0", "e1"]

    async def test_the_index_comes_off_the_records_budget(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Lines and overhead are counted in the budget when the index shows an entry."""
        sid = await make_session()
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid,
                session_id=str(sid),
                records=[rec(f"{i:04d}".ljust(40, ".")) for i in range(10)],  # 10 tokens each
            )
        )
        assert len((await begin(stub, space, sid, window=50, index=caps(overhead=20))).records) == 5
        await remember(stub, space, "a", "x" * 33)  # "- a: " + 33 + "\n" = 39 chars: 10 tokens
        turn = await begin(stub, space, sid, window=50, index=caps(overhead=20))
        assert [r.seq for r in turn.records] == [9, 10]  # 50 - 10 - 20 = 20

    async def test_another_space_s_entries_are_never_shown(
        self,
        stub: Stub,
        stub_for: Any,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
    ) -> None:
        """A turn of one space shows its own space's entries only."""
        await remember(stub_for(other_space.key), other_space, "theirs", "s")
        sid = await make_session()
        turn = await begin(stub, space, sid, index=caps())
        assert (list(turn.memory_index), turn.memory_total) == ([], 0)

    async def test_caps_out_of_range_are_refused(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """max_entries outside 1..1000 and negative token caps are INVALID_ARGUMENT."""
        sid = await make_session()
        error = await rpc_error(begin(stub, space, sid, index=caps(0, -1, -1)))
        assert [v.field for v in field_violations(error)] == [
            "memory_index.max_entries",
            "memory_index.max_tokens",
            "memory_index.overhead_tokens",
        ]


class TestSkills:
    @pytest.mark.parametrize(
        ("stored", "expected"),
        [
            pytest.param(None, None, id="no-config"),
            pytest.param({"system_prompt": "p"}, None, id="unset"),
            pytest.param({"skills": []}, [], id="none"),
            pytest.param({"skills": ["a", "b"]}, ["a", "b"], id="list"),
        ],
    )
    async def test_the_allow_list_of_the_frozen_config(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
        stored: dict[str, Any] | None,
        expected: list[str] | None,
    ) -> None:
        """The config's skills: unset when none is set, [] kept apart from unset."""
        sid = await make_session()
        if stored is not None:
            await pool.execute(
                "INSERT INTO session_configs (space_id, session_id, config) VALUES ($1, $2, $3)",
                space.id,
                sid,
                stored,  # the pool's jsonb codec encodes it
            )
        turn = await begin(stub, space, sid)
        found = list(turn.skills.names) if turn.HasField("skills") else None
        assert found == expected
