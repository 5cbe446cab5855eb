"""RememberResultOp and GetRememberedResult: a caller's idempotency entry, stored with its work."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import asyncpg
import grpc
import pytest

from stello.errors import error_info_reason, field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rec, rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
Check = storage_pb2.Precondition
HASH = b"\x01" * 32


def remember_op(
    request_id: str,
    response: bytes = b"reply",
    scope: str = "gateway.Send",
    *,
    require_new: bool = False,
) -> Op:
    return Op(
        remember_result=Op.RememberResultOp(
            scope=scope,
            request_id=request_id,
            request_hash=HASH,
            response=response,
            require_new=require_new,
        )
    )


def append_op(session_id: uuid.UUID, content: str) -> Op:
    return Op(append_records=Op.AppendRecordsOp(session_id=str(session_id), records=[rec(content)]))


async def remembered(
    stub: Stub, space: TestSpace, request_id: str, scope: str = "gateway.Send"
) -> storage_pb2.GetRememberedResultResponse:
    reply: storage_pb2.GetRememberedResultResponse = await stub.GetRememberedResult(
        storage_pb2.GetRememberedResultRequest(
            space_id=space.sid, scope=scope, request_id=request_id
        )
    )
    return reply


class TestRememberResult:
    async def test_stored_with_the_work(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A Transact's remember_result is read back with its hash and response."""
        sid = await make_session()
        reply = await stub.Transact(
            storage_pb2.TransactRequest(
                space_id=space.sid, operations=[append_op(sid, "hi"), remember_op("r1", b"turn")]
            )
        )
        assert [r.WhichOneof("kind") for r in reply.results] == [
            "append_records",
            "remember_result",
        ]
        found = await remembered(stub, space, "r1")
        assert (found.found, found.request_hash, found.response) == (True, HASH, b"turn")

    async def test_failed_precondition_stores_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A Transact aborted by a precondition leaves no entry (stored iff committed)."""
        sid = await make_session()
        check = Check(session_last_seq=Check.SessionLastSeqCheck(session_id=str(sid), expected=7))
        error = await rpc_error(
            stub.Transact(
                storage_pb2.TransactRequest(
                    space_id=space.sid,
                    preconditions=[check],
                    operations=[append_op(sid, "hi"), remember_op("r2")],
                )
            )
        )
        assert error.code() is grpc.StatusCode.ABORTED
        assert not (await remembered(stub, space, "r2")).found

    async def test_unknown_key_and_other_scope(self, stub: Stub, space: TestSpace) -> None:
        """An unknown id, or a known id under another scope, is not found."""
        await stub.Transact(
            storage_pb2.TransactRequest(space_id=space.sid, operations=[remember_op("r3")])
        )
        assert not (await remembered(stub, space, "never")).found
        assert not (await remembered(stub, space, "r3", scope="gateway.Other")).found

    async def test_other_space_does_not_see_it(
        self, stub: Stub, stub_for: Callable[[str], Stub], space: TestSpace, other_space: TestSpace
    ) -> None:
        """An entry is kept per space: another space's same key is not found."""
        await stub.Transact(
            storage_pb2.TransactRequest(space_id=space.sid, operations=[remember_op("r4")])
        )
        other = stub_for(other_space.key)
        assert not (await remembered(other, other_space, "r4")).found

    async def test_a_later_op_replaces_it(self, stub: Stub, space: TestSpace) -> None:
        """A second remember_result under the same key replaces the first."""
        for response in (b"first", b"second"):
            await stub.Transact(
                storage_pb2.TransactRequest(
                    space_id=space.sid, operations=[remember_op("r5", response)]
                )
            )
        assert (await remembered(stub, space, "r5")).response == b"second"

    @pytest.mark.parametrize(
        ("scope", "request_id", "request_hash", "field"),
        [
            pytest.param("", "r", HASH, "operations[0].remember_result.scope", id="no-scope"),
            pytest.param(
                "storage.Transact",
                "r",
                HASH,
                "operations[0].remember_result.scope",
                id="storage-scope",
            ),
            pytest.param(
                "gateway.Send", "", HASH, "operations[0].remember_result.request_id", id="no-id"
            ),
            pytest.param(
                "gateway.Send",
                "r",
                b"",
                "operations[0].remember_result.request_hash",
                id="no-hash",
            ),
        ],
    )
    async def test_invalid_op(
        self,
        stub: Stub,
        space: TestSpace,
        scope: str,
        request_id: str,
        request_hash: bytes,
        field: str,
    ) -> None:
        """A remember_result lacking scope, id or hash, or in storage.*, is INVALID_ARGUMENT."""
        op = Op(
            remember_result=Op.RememberResultOp(
                scope=scope, request_id=request_id, request_hash=request_hash, response=b"x"
            )
        )
        error = await rpc_error(
            stub.Transact(storage_pb2.TransactRequest(space_id=space.sid, operations=[op]))
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [field]

    async def test_get_validates_key(self, stub: Stub, space: TestSpace) -> None:
        """GetRememberedResult without a scope or request_id is INVALID_ARGUMENT naming both."""
        error = await rpc_error(remembered(stub, space, "", scope=""))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert {v.field for v in field_violations(error)} == {"scope", "request_id"}


async def record_count(pool: asyncpg.Pool, space: TestSpace, session_id: uuid.UUID) -> int:
    count: int = await pool.fetchval(
        "SELECT count(*) FROM records WHERE space_id = $1 AND session_id = $2",
        space.id,
        session_id,
    )
    return count


class TestRequireNew:
    async def test_new_key_is_stored_with_the_work(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """require_new under an unused key stores the entry and applies the operations."""
        sid = await make_session()
        await stub.Transact(
            storage_pb2.TransactRequest(
                space_id=space.sid,
                operations=[remember_op("n1", b"made", require_new=True), append_op(sid, "hi")],
            )
        )
        found = await remembered(stub, space, "n1")
        assert (found.found, found.response) == (True, b"made")
        assert await record_count(pool, space, sid) == 1

    async def test_live_key_fails_and_applies_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """require_new under a live entry is ALREADY_EXISTS REQUEST_ID_REUSED naming the
        field; the entry and the session stay as they were."""
        sid = await make_session()
        await stub.Transact(
            storage_pb2.TransactRequest(space_id=space.sid, operations=[remember_op("n2", b"1")])
        )
        error = await rpc_error(
            stub.Transact(
                storage_pb2.TransactRequest(
                    space_id=space.sid,
                    operations=[
                        append_op(sid, "before"),
                        remember_op("n2", b"2", require_new=True),
                        append_op(sid, "after"),
                    ],
                )
            )
        )
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"
        assert "operations[1].remember_result.request_id" in (error.details() or "")
        assert (await remembered(stub, space, "n2")).response == b"1"
        assert await record_count(pool, space, sid) == 0

    async def test_expired_key_is_replaced(
        self, stub: Stub, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """An entry past its 24 h does not count: require_new replaces it."""
        await stub.Transact(
            storage_pb2.TransactRequest(space_id=space.sid, operations=[remember_op("n3", b"old")])
        )
        await pool.execute(
            "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' "
            "WHERE space_id = $1 AND request_id = 'n3'",
            space.id,
        )
        await stub.Transact(
            storage_pb2.TransactRequest(
                space_id=space.sid, operations=[remember_op("n3", b"new", require_new=True)]
            )
        )
        assert (await remembered(stub, space, "n3")).response == b"new"

    async def test_same_key_twice_in_one_transact(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A require_new after an operation of the same Transact stored the key fails it
        whole: no entry, no record."""
        sid = await make_session()
        error = await rpc_error(
            stub.Transact(
                storage_pb2.TransactRequest(
                    space_id=space.sid,
                    operations=[
                        remember_op("n4", b"a", require_new=True),
                        append_op(sid, "hi"),
                        remember_op("n4", b"b", require_new=True),
                    ],
                )
            )
        )
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert "operations[2]" in (error.details() or "")
        assert not (await remembered(stub, space, "n4")).found
        assert await record_count(pool, space, sid) == 0


async def test_a_remembered_result_linked_to_no_session_is_not_found(
    stub: Stub, space: TestSpace, make_session: MakeSession
) -> None:
    """A remember_result linked to a session the space does not hold is NOT_FOUND with
    reason SESSION_NOT_FOUND, and the transaction's other operations apply nothing."""
    sid = await make_session()
    op = remember_op("linked-to-none")
    op.remember_result.session_ids.append(str(uuid.uuid4()))
    error = await rpc_error(
        stub.Transact(
            storage_pb2.TransactRequest(space_id=space.sid, operations=[append_op(sid, "x"), op])
        )
    )
    assert error.code() is grpc.StatusCode.NOT_FOUND
    assert error_info_reason(error) == "SESSION_NOT_FOUND"
    assert "operations[1].remember_result.session_ids" in (error.details() or "")
    assert not (await remembered(stub, space, "linked-to-none")).found
    listed = await stub.ListRecords(
        storage_pb2.ListRecordsRequest(space_id=space.sid, session_id=str(sid))
    )
    assert not listed.records
