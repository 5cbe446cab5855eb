"""Inheriting by reference (Transact's InheritRecordsOp; DESIGN §4.4, §5.15) on a real
storage server: what a child shows, where the cut falls, every read through the lineage
(pages, BeginTurn's window and tail estimate, summaries), trims on either side, bad input
and tenancy."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import ASSISTANT, TOOL, rec, rpc_error
from tests.storage.turns.test_turn_window import begin, put_cache, sized
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.rows import space_rows

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation


async def inherit(
    stub: Stub, space: TestSpace, child: uuid.UUID, source: uuid.UUID, until: int | None = None
) -> int:
    """Transact one InheritRecordsOp; the cut it answers."""
    op = Op.InheritRecordsOp(session_id=str(child), source_id=str(source))
    if until is not None:
        op.until_seq = until
    reply = await stub.Transact(
        storage_pb2.TransactRequest(space_id=space.sid, operations=[Op(inherit_records=op)])
    )
    cut: int = reply.results[0].inherit_records.until_seq
    return cut


async def append(stub: Stub, space: TestSpace, sid: uuid.UUID, *records: Any) -> None:
    await stub.AppendRecords(
        storage_pb2.AppendRecordsRequest(space_id=space.sid, session_id=str(sid), records=records)
    )


async def listed(stub: Stub, space: TestSpace, sid: uuid.UUID, **fields: Any) -> list[Any]:
    reply = await stub.ListRecords(
        storage_pb2.ListRecordsRequest(space_id=space.sid, session_id=str(sid), **fields)
    )
    return list(reply.records)


def shown(records: list[Any]) -> list[tuple[int, str, bool]]:
    return [(r.seq, r.content, r.inherited) for r in records]


def calls(*ids: str) -> list[common_pb2.ToolCall]:
    return [common_pb2.ToolCall(id=i, name="f", arguments_json="{}") for i in ids]


class TestView:
    async def test_child_shows_the_source_verbatim_then_its_own(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Seqs, roles, contents, tool calls, created_at and metadata kept; `inherited` set;
        the child's own records numbered after the cut; later source appends never show."""
        source, child = await make_session(), await make_session()
        meta = struct_pb2.Struct()
        meta.update({"k": "v"})
        when = timestamp_pb2.Timestamp(seconds=1_700_000_000)
        await append(
            stub,
            space,
            source,
            rec("q", created_at=when, metadata=meta),
            rec("", role=ASSISTANT, tool_calls=calls("a")),
            rec("r", role=TOOL, tool_call_id="a"),
            rec("done", role=ASSISTANT),
            rec("later"),
        )
        assert await inherit(stub, space, child, source, until=4) == 4
        await append(stub, space, child, rec("mine"))
        await append(stub, space, source, rec("much later"))
        source_records = await listed(stub, space, source)
        records = await listed(stub, space, child)
        for theirs, ours in zip(source_records[:4], records[:4], strict=True):
            copy = common_pb2.Record()
            copy.CopyFrom(theirs)
            copy.inherited = True
            assert ours == copy
        assert shown(records[4:]) == [(5, "mine", False)]
        assert not any(r.inherited for r in source_records)

    async def test_until_beyond_the_last_seq_inherits_all(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        source, child, empty_child = [await make_session() for _ in range(3)]
        await append(stub, space, source, rec("a"), rec("b"))
        assert await inherit(stub, space, child, source, until=99) == 2
        assert shown(await listed(stub, space, child)) == [(1, "a", True), (2, "b", True)]
        empty = await make_session()
        assert await inherit(stub, space, empty_child, empty) == 0
        assert await listed(stub, space, empty_child) == []

    async def test_a_fork_of_a_fork_inherits_transitively(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        a, b, c = [await make_session() for _ in range(3)]
        await append(stub, space, a, *[rec(f"a{i}") for i in range(5)])
        await inherit(stub, space, b, a, until=3)
        await append(stub, space, b, rec("b4"), rec("b5"))
        await inherit(stub, space, c, b, until=4)
        await append(stub, space, c, rec("c5"))
        assert shown(await listed(stub, space, c)) == [
            (1, "a0", True),
            (2, "a1", True),
            (3, "a2", True),
            (4, "b4", True),
            (5, "c5", False),
        ]
        pages = [
            shown(await listed(stub, space, c, limit=2, newest_first=True)),
            shown(await listed(stub, space, c, limit=2, after_seq=2, before_seq=5)),
            shown(await listed(stub, space, c, limit=10, offset=3)),
        ]
        assert pages == [
            [(4, "b4", True), (5, "c5", False)],
            [(3, "a2", True), (4, "b4", True)],
            [(4, "b4", True), (5, "c5", False)],
        ]


class TestCut:
    async def test_an_open_tool_group_at_the_cut_is_left_out(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Cut after some of a group's results, or after the call: the group goes; cut after
        all results: it stays."""
        source = await make_session()
        await append(
            stub,
            space,
            source,
            rec("q"),
            rec("", role=ASSISTANT, tool_calls=calls("a", "b")),
            rec("ra", role=TOOL, tool_call_id="a"),
            rec("rb", role=TOOL, tool_call_id="b"),
            rec("next"),
        )
        for until, cut in ((2, 1), (3, 1), (4, 4), (5, 5)):
            child = await make_session()
            assert await inherit(stub, space, child, source, until=until) == cut
            assert [r.seq for r in await listed(stub, space, child)] == list(range(1, cut + 1))
            await append(stub, space, child, rec("own"))
            assert (await listed(stub, space, child))[-1].seq == cut + 1
            # The view has no hole where the group was: a trim counts it by ranges.
            assert await trim(stub, space, child, 1) == cut
            assert [r.seq for r in await listed(stub, space, child)] == [cut + 1]

    async def test_an_unanswered_group_inside_the_range_stays(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        source, child = await make_session(), await make_session()
        await append(
            stub,
            space,
            source,
            rec("q"),
            rec("", role=ASSISTANT, tool_calls=calls("a", "b")),
            rec("ra", role=TOOL, tool_call_id="a"),
            rec("never mind"),
        )
        assert await inherit(stub, space, child, source) == 4
        assert [r.seq for r in await listed(stub, space, child)] == [1, 2, 3, 4]


class TestTurn:
    async def test_window_and_tail_estimate_are_a_copys(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """BeginTurn's window, tail estimate and summary on a child (and a grandchild) equal
        those of a session holding copies of the same records and summary."""
        source, child, grandchild, copy = [await make_session() for _ in range(4)]
        records = [sized(i, 10) for i in range(120)]
        await append(stub, space, source, *records)
        await put_cache(stub, space, source, "older turns", 20)
        await inherit(stub, space, child, source, until=100)
        await append(stub, space, child, *[sized(900 + i, 7) for i in range(15)])
        await inherit(stub, space, grandchild, child, until=110)
        await append(stub, space, copy, *records[:100], *[sized(900 + i, 7) for i in range(10)])
        await put_cache(stub, space, copy, "older turns", 20)
        for window in (10_000, 400, 60):
            ours = await end_turn(stub, space, await begin(stub, space, grandchild, window=window))
            theirs = await end_turn(stub, space, await begin(stub, space, copy, window=window))
            assert [(r.seq, r.content) for r in ours.records] == [
                (r.seq, r.content) for r in theirs.records
            ]
            assert (ours.tail_tokens, ours.first_tail_seq) == (
                theirs.tail_tokens,
                theirs.first_tail_seq,
            )
            assert ours.cache == theirs.cache

    async def test_the_child_starts_from_the_newest_summary_at_or_below_the_cut(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        source, late, early = [await make_session() for _ in range(3)]
        await append(stub, space, source, *[rec(f"r{i}") for i in range(30)])
        await put_cache(stub, space, source, "through ten", 10)
        await put_cache(stub, space, source, "through twenty", 20)
        await inherit(stub, space, late, source, until=25)
        await inherit(stub, space, early, source, until=5)
        assert (await cache_of(stub, space, late)).summary == "through twenty"
        assert (await cache_of(stub, space, late)).covered_until_seq == 20
        assert await cache_of(stub, space, early) is None


async def end_turn(stub: Stub, space: TestSpace, reply: Any) -> Any:
    """End the lease a test's BeginTurn took; the turn it answered."""
    op = Op.ReleaseTurnOp(session_id=reply.turn.session.id, token=reply.token)
    await stub.Transact(
        storage_pb2.TransactRequest(space_id=space.sid, operations=[Op(release_turn=op)])
    )
    return reply.turn


async def cache_of(stub: Stub, space: TestSpace, sid: uuid.UUID) -> Any:
    reply = await stub.GetCompressionCache(
        storage_pb2.GetCompressionCacheRequest(space_id=space.sid, session_id=str(sid))
    )
    return reply.cache if reply.HasField("cache") else None


class TestTrim:
    async def test_trimming_a_child_trims_only_its_view(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        source, child = await make_session(), await make_session()
        await append(stub, space, source, *[rec(f"s{i}") for i in range(6)])
        await inherit(stub, space, child, source)
        await append(stub, space, child, rec("own1"), rec("own2"))
        removed = await trim(stub, space, child, keep=3)
        assert removed == 5
        assert shown(await listed(stub, space, child)) == [
            (6, "s5", True),
            (7, "own1", False),
            (8, "own2", False),
        ]
        assert len(await listed(stub, space, source)) == 6

    async def test_trimming_a_source_keeps_what_its_forks_show(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """The rows forks read go to one fork first: no fork's records change; the source
        shows its newest only; the records table holds what some session shows."""
        source, near, far = [await make_session() for _ in range(3)]
        await append(stub, space, source, *[rec(f"s{i}") for i in range(10)])
        await inherit(stub, space, near, source, until=4)
        await inherit(stub, space, far, source, until=8)
        before = {s: shown(await listed(stub, space, s)) for s in (near, far)}
        assert await trim(stub, space, source, keep=1) == 9
        assert shown(await listed(stub, space, source)) == [(10, "s9", False)]
        assert {s: shown(await listed(stub, space, s)) for s in (near, far)} == before
        async with pool.acquire() as con:
            rows = await con.fetchval("SELECT count(*) FROM records WHERE space_id = $1", space.id)
        assert rows == 9  # s0..s7 (forks) and s9 (source); s8 is gone

    async def test_a_reader_of_an_heir_trims_what_no_one_else_reads(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """An heir holds rows beyond its own view for its readers (it had trimmed its view
        before its source went); a reader's trim deletes those that no other reader reads
        and keeps the others (migration 0032), and no other view changes."""
        source, short, long, heir = [await make_session() for _ in range(4)]
        await append(stub, space, source, *[rec(f"s{i}") for i in range(10)])
        await inherit(stub, space, short, source, until=2)
        await inherit(stub, space, long, source, until=6)
        await inherit(stub, space, heir, source)
        assert await trim(stub, space, heir, keep=4) == 6
        assert await trim(stub, space, source, keep=0) == 10
        held = "SELECT seq FROM records WHERE space_id = $1 AND session_id = $2 ORDER BY seq"
        async with pool.acquire() as con:
            assert [r["seq"] for r in await con.fetch(held, space.id, heir)] == list(range(1, 11))
        before = {s: shown(await listed(stub, space, s)) for s in (short, heir)}
        assert await trim(stub, space, long, keep=0) == 6
        assert await listed(stub, space, long) == []
        assert {s: shown(await listed(stub, space, s)) for s in (short, heir)} == before
        async with pool.acquire() as con:
            assert [r["seq"] for r in await con.fetch(held, space.id, heir)] == [1, 2, 7, 8, 9, 10]
            rows = await con.fetchval("SELECT count(*) FROM records WHERE space_id = $1", space.id)
        assert rows == 6

    @pytest.mark.parametrize("keep", [0, 2])
    async def test_a_fork_of_a_trimmed_source_pages_past_what_went(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, keep: int
    ) -> None:
        """A fork of a source trimmed below its cut reads none of the trimmed seqs as
        held: every page size and offset reaches the child's own records (its first
        page of one once came back empty: the trimmed seqs counted as rows ahead)."""
        source, child = await make_session(), await make_session()
        await append(stub, space, source, *[rec(f"s{i}") for i in range(6)])
        await trim(stub, space, source, keep=keep)
        await inherit(stub, space, child, source)
        await append(stub, space, child, rec("own1"), rec("own2"))
        view = [(s, f"s{s - 1}", True) for s in range(7 - keep, 7)]
        view += [(7, "own1", False), (8, "own2", False)]
        for newest_first in (False, True):
            for limit in range(1, len(view) + 1):
                page = await listed(stub, space, child, limit=limit, newest_first=newest_first)
                want = view[-limit:] if newest_first else view[:limit]
                assert shown(page) == want, (newest_first, limit)
            for offset in range(len(view)):
                page = await listed(stub, space, child, limit=1, offset=offset)
                assert shown(page) == view[offset : offset + 1], offset


async def trim(stub: Stub, space: TestSpace, sid: uuid.UUID, keep: int) -> int:
    reply = await stub.TrimRecords(
        storage_pb2.TrimRecordsRequest(space_id=space.sid, session_id=str(sid), keep_recent=keep)
    )
    removed: int = reply.removed_count
    return removed


class TestRefused:
    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"source_id": "nope"}, "operations[0].inherit_records.source_id"),
            ({"source_id": ""}, "operations[0].inherit_records.source_id"),
            ({"until_seq": -1}, "operations[0].inherit_records.until_seq"),
        ],
    )
    async def test_bad_fields_name_themselves(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        fields: dict[str, Any],
        field: str,
    ) -> None:
        child, source = await make_session(), await make_session()
        op = Op.InheritRecordsOp(session_id=str(child), source_id=str(source))
        for name, value in fields.items():
            setattr(op, name, value)
        error = await rpc_error(
            stub.Transact(
                storage_pb2.TransactRequest(space_id=space.sid, operations=[Op(inherit_records=op)])
            )
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(error)]

    async def test_the_session_itself_is_no_source(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        child = await make_session()
        error = await rpc_error(inherit(stub, space, child, child))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [
            "operations[0].inherit_records.source_id"
        ]

    async def test_only_a_new_session_inherits(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A session with records, or one that inherited already: FAILED_PRECONDITION, and
        nothing changes."""
        source, used, forked = [await make_session() for _ in range(3)]
        await append(stub, space, source, rec("a"))
        await append(stub, space, used, rec("mine"))
        await inherit(stub, space, forked, source)
        before = await space_rows(pool, space.id)
        for child in (used, forked):
            error = await rpc_error(inherit(stub, space, child, source))
            assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert error_info_reason(error) == "SESSION_NOT_EMPTY"
        assert await space_rows(pool, space.id) == before

    async def test_a_source_of_another_space_is_not_found(
        self,
        stub: Stub,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
    ) -> None:
        """Lineage never crosses spaces: a foreign, unknown or provisional source is NOT_FOUND
        and the child is unchanged."""
        child = await make_session()
        foreign = await make_session(space_id=other_space.id)
        provisional = await make_session(provisional=True)
        before = await space_rows(pool, space.id)
        for source in (foreign, uuid.uuid4(), provisional):
            error = await rpc_error(inherit(stub, space, child, source))
            assert error.code() is grpc.StatusCode.NOT_FOUND
            assert str(source) in (error.details() or "")
        assert await space_rows(pool, space.id) == before


async def test_a_space_of_fork_chains_and_trimmed_sources_is_erased(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool, keys: KeyStore
) -> None:
    """`stello spaces delete` (KeyStore.delete_space) erases a space whose sessions name
    each other without a cascade: forks of forks (lineage sources) and a trimmed source
    (its rows held by a fork). Its cascade alone failed on about every other chain, as
    the sessions happened to be deleted; eight chains leave it no chance."""
    roots = []
    for _ in range(8):
        root = await make_session()
        await append(stub, space, root, rec("r1"), rec("r2"))
        child = await make_session(parent=root)
        await inherit(stub, space, child, root)
        await append(stub, space, child, rec("c"))
        grandchild = await make_session(parent=child)
        await inherit(stub, space, grandchild, child)
        roots.append(root)
    await trim(stub, space, roots[0], keep=0)  # its rows go to a fork: a holder
    assert await keys.delete_space(space.id) == space.id
    assert all(rows == [] for rows in (await space_rows(pool, space.id)).values())
    assert await keys.delete_space(space.id) is None
