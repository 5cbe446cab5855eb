"""Transact: preconditions, then operations, all or nothing (spec §6.1.4-5, DESIGN §4.2)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations, precondition_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import ASSISTANT, rec, rpc_error, state
from tests.storage.records.test_lineage import inherit, listed
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.history import RowUpdates

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
Check = storage_pb2.Precondition


def append_op(session_id: uuid.UUID, *contents: str) -> Op:
    return Op(
        append_records=Op.AppendRecordsOp(
            session_id=str(session_id), records=[rec(c) for c in contents]
        )
    )


def prompt_op(session_id: uuid.UUID, content: str) -> Op:
    return Op(put_system_prompt=Op.PutSystemPromptOp(session_id=str(session_id), content=content))


async def transact(
    stub: Stub,
    space: TestSpace,
    operations: list[Op],
    preconditions: Sequence[Check] = (),
    request_id: str = "",
) -> list[storage_pb2.OperationResult]:
    reply = await stub.Transact(
        storage_pb2.TransactRequest(
            space_id=space.sid,
            preconditions=preconditions,
            operations=operations,
            request_id=request_id,
        )
    )
    return list(reply.results)


class TestTransact:
    async def test_committed_writes_are_visible(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A put_session and a system prompt of one Transact are both visible (spec §6.1.4)."""
        sid = await make_session()
        meta = common_pb2.SessionMeta(
            id=str(sid), label="Renamed", status=common_pb2.SESSION_STATUS_ACTIVE
        )
        results = await transact(
            stub, space, [Op(put_session=Op.PutSessionOp(session=meta)), prompt_op(sid, "Be brief")]
        )
        assert [r.WhichOneof("kind") for r in results] == ["put_session", "put_system_prompt"]
        assert results[0].put_session.session.label == "Renamed"
        after = await state(pool, space.id, sid)
        assert (after["label"], after["system_prompt"]) == ("Renamed", "Be brief")

    async def test_failing_operation_applies_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A failing operation answers its error and rolls back the earlier ones (spec §6.1.5)."""
        sid = await make_session()
        before = await state(pool, space.id, sid)
        err = await rpc_error(
            transact(
                stub,
                space,
                [prompt_op(sid, "p"), append_op(sid, "a"), append_op(uuid.uuid4(), "x")],
            )
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert await state(pool, space.id, sid) == before

    async def test_one_bad_operation_is_invalid_and_applies_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """An UNSPECIFIED role in operation 1 is INVALID_ARGUMENT naming it; nothing applies."""
        sid = await make_session()
        before = await state(pool, space.id, sid)
        bad = append_op(sid, "ok", "bad")
        bad.append_records.records[1].role = common_pb2.RECORD_ROLE_UNSPECIFIED
        err = await rpc_error(transact(stub, space, [prompt_op(sid, "p"), bad]))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == [
            "operations[1].append_records.records[1].role"
        ]
        assert await state(pool, space.id, sid) == before

    async def test_failed_precondition_is_aborted_and_applies_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A stale session_last_seq is ABORTED CONCURRENT_MODIFICATION; nothing applies."""
        sid = await make_session()
        await transact(stub, space, [append_op(sid, "one")])
        before = await state(pool, space.id, sid)
        checks = [
            Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=1)),
            Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=0)),
        ]
        err = await rpc_error(transact(stub, space, [append_op(sid, "two")], checks))
        assert err.code() == grpc.StatusCode.ABORTED
        assert error_info_reason(err) == "CONCURRENT_MODIFICATION"
        assert [(v.type, v.subject) for v in precondition_violations(err)] == [
            ("session_last_seq", "preconditions[1]")
        ]
        assert await state(pool, space.id, sid) == before

    async def test_turn_commit(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A turn commit appends, bumps the turn, clears the insight and releases the lease."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        await stub.PutInsight(storage_pb2.PutInsightRequest(**target, content="hint"))
        lease = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        checks = [
            Check(turn_lease=Check.TurnLeaseCheck(session_id=str(sid), token=lease.token)),
            Check(
                insight_unchanged=Check.InsightUnchangedCheck(session_id=str(sid), expected="hint")
            ),
            Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=0)),
        ]
        turn = Op.AppendRecordsOp(session_id=str(sid), records=[rec("hi"), rec("hello", ASSISTANT)])
        ops = [
            Op(append_records=turn),
            Op(bump_turn=Op.BumpTurnOp(session_id=str(sid))),
            Op(clear_insight=Op.ClearInsightOp(session_id=str(sid))),
            Op(release_turn=Op.ReleaseTurnOp(session_id=str(sid), token=lease.token)),
        ]
        results = await transact(stub, space, ops, checks)
        assert [r.seq for r in results[0].append_records.records] == [1, 2]
        assert results[1].bump_turn.session.turn_count == 1
        assert results[3].release_turn.released
        after = await state(pool, space.id, sid)
        assert (after["records"], after["turn_count"], after["insight"], after["turn_token"]) == (
            2,
            1,
            None,
            None,
        )
        await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))

    async def test_insight_put_during_the_turn_survives(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """An insight changed after it was read fails insight_unchanged; the new one is kept."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        await stub.PutInsight(storage_pb2.PutInsightRequest(**target, content="newer"))
        checks = [Check(insight_unchanged=Check.InsightUnchangedCheck(session_id=str(sid)))]
        err = await rpc_error(
            transact(
                stub, space, [Op(clear_insight=Op.ClearInsightOp(session_id=str(sid)))], checks
            )
        )
        assert err.code() == grpc.StatusCode.ABORTED
        assert (await state(pool, space.id, sid))["insight"] == "newer"

    async def test_a_trim_checks_an_insight_and_a_memory_version_of_its_session(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A Transact that trims a session read by a fork and checks its insight, memory
        version, lease and last seq: the checked session is locked FOR UPDATE in the
        trim's pass with the reader (issue #34), and each check reads the locked row."""
        sid, reader = await make_session(), await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        await transact(stub, space, [append_op(sid, "t1", "t2", "t3")])
        await inherit(stub, space, reader, sid)
        await stub.PutInsight(storage_pb2.PutInsightRequest(**target, content="hint"))
        lease = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        checks = [
            Check(turn_lease=Check.TurnLeaseCheck(session_id=str(sid), token=lease.token)),
            Check(
                insight_unchanged=Check.InsightUnchangedCheck(session_id=str(sid), expected="hint")
            ),
            Check(memory_version=Check.MemoryVersionCheck(session_id=str(sid), expected=0)),
            Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=3)),
        ]
        ops = [
            Op(trim_records=Op.TrimRecordsOp(session_id=str(sid), keep_recent=1)),
            Op(clear_insight=Op.ClearInsightOp(session_id=str(sid))),
        ]
        await transact(stub, space, ops, checks)
        assert [r.content for r in await listed(stub, space, sid)] == ["t3"]
        assert [r.content for r in await listed(stub, space, reader)] == ["t1", "t2", "t3"]
        assert (await state(pool, space.id, sid))["insight"] is None
        err = await rpc_error(transact(stub, space, ops, checks))
        assert [v.type for v in precondition_violations(err)] == ["insight_unchanged"]

    async def test_stale_lease_fails(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A turn_lease check with a token ReleaseTurn gave back (no commit) is ABORTED as
        plain `turn_lease`."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        lease = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        await stub.ReleaseTurn(storage_pb2.ReleaseTurnRequest(**target, token=lease.token))
        checks = [Check(turn_lease=Check.TurnLeaseCheck(session_id=str(sid), token=lease.token))]
        err = await rpc_error(transact(stub, space, [append_op(sid, "late")], checks))
        assert [v.type for v in precondition_violations(err)] == ["turn_lease"]

    async def test_an_archived_session_fails_session_active(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A session archived while a turn held its lease fails a session_active check
        (ABORTED, type `session_active`, nothing applied); once active again it holds."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        lease = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        checks = [
            Check(turn_lease=Check.TurnLeaseCheck(session_id=str(sid), token=lease.token)),
            Check(session_active=Check.SessionActiveCheck(session_id=str(sid))),
        ]
        for status in (common_pb2.SESSION_STATUS_ARCHIVED, common_pb2.SESSION_STATUS_ACTIVE):
            meta = common_pb2.SessionMeta(id=str(sid), label="L", status=status)
            await stub.PutSession(storage_pb2.PutSessionRequest(space_id=space.sid, session=meta))
            if status == common_pb2.SESSION_STATUS_ACTIVE:
                break
            err = await rpc_error(transact(stub, space, [append_op(sid, "late")], checks))
            assert [v.type for v in precondition_violations(err)] == ["session_active"]
            assert [r.content for r in await listed(stub, space, sid)] == []
        await transact(stub, space, [append_op(sid, "now")], checks)
        assert [r.content for r in await listed(stub, space, sid)] == ["now"]

    async def test_a_retried_commit_learns_it_was_stored(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """The same commit sent again after it committed fails as `turn_lease_released` (its
        token was released by a committed Transact), changing nothing; once another turn
        commits, that token is plain `turn_lease` again."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}

        async def commit(token: str, text: str) -> list[storage_pb2.OperationResult]:
            checks = [Check(turn_lease=Check.TurnLeaseCheck(session_id=str(sid), token=token))]
            ops = [
                append_op(sid, text),
                Op(release_turn=Op.ReleaseTurnOp(session_id=str(sid), token=token)),
            ]
            return await transact(stub, space, ops, checks)

        first = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        await commit(first.token, "once")
        stored = await state(pool, space.id, sid)
        err = await rpc_error(commit(first.token, "once"))
        assert err.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(err) == "CONCURRENT_MODIFICATION"
        assert [v.type for v in precondition_violations(err)] == ["turn_lease_released"]
        assert await state(pool, space.id, sid) == stored
        second = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        await commit(second.token, "twice")
        err = await rpc_error(commit(first.token, "once"))
        assert [v.type for v in precondition_violations(err)] == ["turn_lease"]

    async def test_touch_only_keeps_the_turn_count(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """bump_turn with touch_only moves last_active_at and leaves turn_count and updated_at."""
        sid = await make_session()
        (result,) = await transact(
            stub, space, [Op(bump_turn=Op.BumpTurnOp(session_id=str(sid), touch_only=True))]
        )
        meta = result.bump_turn.session
        assert meta.turn_count == 0
        assert meta.last_active_at.ToDatetime() > meta.updated_at.ToDatetime()

    @pytest.mark.plain_postgres(
        "counts updates in pg_stat_user_tables, which a Citus coordinator does not keep"
    )
    async def test_a_turns_bump_is_a_hot_update(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        direct_database_url: str,
    ) -> None:
        """bump_turn changes no indexed column of `sessions` (last_active_at is not indexed;
        retention's index holds its UTC day, which changes once a day): every turn's update
        of the row is HOT, no index entry written (on main: the retention index held
        last_active_at itself, and no bump was HOT)."""
        sid = await make_session()
        bump = [Op(bump_turn=Op.BumpTurnOp(session_id=str(sid)))]
        await transact(stub, space, bump)
        counter = await asyncpg.connect(direct_database_url)
        try:
            updates = RowUpdates(counter, "sessions")
            before = await updates.count()
            for _ in range(20):
                await transact(stub, space, bump)
            after = await updates.count()
        finally:
            await counter.close()
        updated, hot = after[0] - before[0], after[1] - before[1]
        assert updated == 20
        assert hot >= 18, f"{hot} of {updated} turn updates were HOT"

    async def test_bump_counts_several_turns(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """bump_turn with turns=N adds N turns at once (an import); a negative count is refused."""
        sid = await make_session()
        (result,) = await transact(
            stub, space, [Op(bump_turn=Op.BumpTurnOp(session_id=str(sid), turns=7))]
        )
        assert result.bump_turn.session.turn_count == 7
        bad = Op(bump_turn=Op.BumpTurnOp(session_id=str(sid), turns=-1))
        err = await rpc_error(transact(stub, space, [bad]))
        assert [v.field for v in field_violations(err)] == ["operations[0].bump_turn.turns"]

    async def test_the_count_stops_at_the_largest_int32(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A turn past 2,147,483,647 (an import's count) is committed and the count stays:
        the column overflowed, INTERNAL on every later turn of the session."""
        sid = await make_session()
        most, counts = 2**31 - 1, []
        for turns in (most - 1, 5, 0):
            (result,) = await transact(
                stub, space, [Op(bump_turn=Op.BumpTurnOp(session_id=str(sid), turns=turns))]
            )
            counts.append(result.bump_turn.session.turn_count)
        assert counts == [most - 1, most, most]

    async def test_operations_see_earlier_ones(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """An append then a trim in one Transact trims the new records too."""
        sid = await make_session()
        trim = Op(trim_records=Op.TrimRecordsOp(session_id=str(sid), keep_recent=1))
        results = await transact(stub, space, [append_op(sid, "a", "b", "c"), trim])
        assert results[1].trim_records.removed_count == 2

    async def test_writes_to_provisional_sessions(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """The fork saga's Transact on a provisional session is accepted (DESIGN §4.1)."""
        sid = await make_session(provisional=True)
        await transact(stub, space, [prompt_op(sid, "child"), append_op(sid, "inherited")])
        after = await state(pool, space.id, sid)
        assert (after["system_prompt"], after["records"]) == ("child", 1)

    async def test_empty_transact_does_nothing(self, stub: Stub, space: TestSpace) -> None:
        """No preconditions and no operations is valid and answers no results."""
        assert await transact(stub, space, []) == []

    async def test_retry_with_same_request_id_applies_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A retry answers the first results, applying once; a changed one is REQUEST_ID_REUSED."""
        sid = await make_session()
        first = await transact(stub, space, [append_op(sid, "x")], request_id="fork-1/storage")
        again = await transact(stub, space, [append_op(sid, "x")], request_id="fork-1/storage")
        assert again == first
        assert (await state(pool, space.id, sid))["records"] == 1
        err = await rpc_error(
            transact(stub, space, [append_op(sid, "y")], request_id="fork-1/storage")
        )
        assert err.code() == grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(err) == "REQUEST_ID_REUSED"

    async def test_retry_whose_precondition_now_fails_answers_the_first(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A retry whose work can no longer succeed (its first call moved the last seq past
        the check) answers the first results, not ABORTED; nothing applied twice."""
        sid = await make_session()
        checks = [
            Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=0))
        ]
        first = await transact(stub, space, [append_op(sid, "x")], checks, request_id="p")
        again = await transact(stub, space, [append_op(sid, "x")], checks, request_id="p")
        assert again == first
        assert (await state(pool, space.id, sid))["records"] == 1

    async def test_failed_call_is_not_remembered(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A Transact that failed is not remembered: its request_id may succeed later."""
        sid = await make_session()
        checks = [
            Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=1))
        ]
        err = await rpc_error(transact(stub, space, [append_op(sid, "x")], checks, request_id="r"))
        assert err.code() == grpc.StatusCode.ABORTED
        await transact(stub, space, [append_op(sid, "first")])
        (result,) = await transact(stub, space, [append_op(sid, "x")], checks, request_id="r")
        assert [r.seq for r in result.append_records.records] == [2]

    async def test_concurrent_with_slot_writes(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Transacts and PutInsight racing on a session with no slot row yet all succeed."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        clear = Op(clear_insight=Op.ClearInsightOp(session_id=str(sid)))
        calls = [transact(stub, space, [prompt_op(sid, f"p{i}"), clear]) for i in range(10)] + [
            stub.PutInsight(storage_pb2.PutInsightRequest(**target, content=f"i{i}"))
            for i in range(10)
        ]
        await asyncio.gather(*calls)
        assert (await state(pool, space.id, sid))["system_prompt"].startswith("p")

    async def test_replay_answers_every_result_kind(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A replayed Transact answers exactly the first results, whatever their kinds."""
        sid = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(sid)}
        lease = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=30))
        meta = common_pb2.SessionMeta(
            id=str(sid), label="R", status=common_pb2.SESSION_STATUS_ARCHIVED
        )
        cache = storage_pb2.CompressionCache(summary="s", covered_until_seq=1)
        ops = [
            append_op(sid, "a", "b"),
            Op(put_session=Op.PutSessionOp(session=meta)),
            prompt_op(sid, "p"),
            Op(put_insight=Op.PutInsightOp(session_id=str(sid), content="")),
            Op(clear_insight=Op.ClearInsightOp(session_id=str(sid))),
            Op(put_memory=Op.PutMemoryOp(session_id=str(sid), content="m")),
            Op(put_compression_cache=Op.PutCompressionCacheOp(session_id=str(sid), cache=cache)),
            Op(trim_records=Op.TrimRecordsOp(session_id=str(sid), keep_recent=1)),
            Op(bump_turn=Op.BumpTurnOp(session_id=str(sid))),
            Op(release_turn=Op.ReleaseTurnOp(session_id=str(sid), token=lease.token)),
        ]
        first = await transact(stub, space, ops, request_id="all-kinds")
        again = await transact(stub, space, ops, request_id="all-kinds")
        assert again == first
        assert [r.WhichOneof("kind") for r in first] == [op.WhichOneof("kind") for op in ops]
        assert first[7].trim_records.removed_count == 1
        assert first[9].release_turn.released


def single_ops(session_id: uuid.UUID) -> dict[str, Op]:
    """One operation of every kind that names a session, for `session_id`."""
    sid = str(session_id)
    meta = common_pb2.SessionMeta(id=sid, label="x", status=common_pb2.SESSION_STATUS_ACTIVE)
    return {
        "append_records": append_op(session_id, "a"),
        "put_session": Op(put_session=Op.PutSessionOp(session=meta)),
        "put_system_prompt": prompt_op(session_id, "p"),
        "put_insight": Op(put_insight=Op.PutInsightOp(session_id=sid, content="i")),
        "clear_insight": Op(clear_insight=Op.ClearInsightOp(session_id=sid)),
        "put_memory": Op(put_memory=Op.PutMemoryOp(session_id=sid, content="m")),
        "put_compression_cache": Op(
            put_compression_cache=Op.PutCompressionCacheOp(
                session_id=sid, cache=storage_pb2.CompressionCache(summary="s")
            )
        ),
        "trim_records": Op(trim_records=Op.TrimRecordsOp(session_id=sid, keep_recent=1)),
        "bump_turn": Op(bump_turn=Op.BumpTurnOp(session_id=sid)),
        "release_turn": Op(release_turn=Op.ReleaseTurnOp(session_id=sid, token="t")),
    }


KINDS = list(single_ops(uuid.uuid4()))


class TestSingleSessionNotFound:
    """A Transact naming one session and no precondition skips the lock statement:
    every operation kind must still answer NOT_FOUND alone, and after a write."""

    @pytest.mark.parametrize("kind", KINDS)
    async def test_unknown_session(self, stub: Stub, space: TestSpace, kind: str) -> None:
        """Each kind of operation on a session that does not exist: NOT_FOUND naming it."""
        missing = uuid.uuid4()
        err = await rpc_error(transact(stub, space, [single_ops(missing)[kind]]))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert str(missing) in (err.details() or "")

    @pytest.mark.parametrize("kind", KINDS)
    async def test_other_space_session_after_a_write(
        self,
        stub: Stub,
        space: TestSpace,
        other_space: TestSpace,
        pool: asyncpg.Pool,
        kind: str,
    ) -> None:
        """Another space's session, after a write to it in the same request: NOT_FOUND,
        and nothing of the request is applied to either space."""
        async with pool.acquire() as con:
            foreign = uuid.uuid4()
            await con.execute(
                "INSERT INTO sessions (space_id, id, root_id, depth, sibling_index, label) "
                "VALUES ($1, $2, $2, 0, 0, 'theirs')",
                other_space.id,
                foreign,
            )
        before = await state(pool, other_space.id, foreign)
        ops = single_ops(foreign)
        err = await rpc_error(transact(stub, space, [ops["put_memory"], ops[kind]]))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert await state(pool, other_space.id, foreign) == before
