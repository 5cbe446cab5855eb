"""Transact's CopySystemPromptOp on a real storage server: the source's slot copied (or
nothing when it has none), bad input naming the field, NOT_FOUND for a source the
caller cannot see (provisional, unknown, another space's), and a failed copy changes nothing."""

from __future__ import annotations

import uuid

import grpc
import pytest

from stello.errors import field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation


def copy_request(
    space: TestSpace, child: uuid.UUID | str, source: uuid.UUID | str, *before: Op
) -> storage_pb2.TransactRequest:
    op = Op.CopySystemPromptOp(session_id=str(child), source_id=str(source))
    return storage_pb2.TransactRequest(
        space_id=space.sid, operations=[*before, Op(copy_system_prompt=op)]
    )


async def put_prompt(stub: Stub, space: TestSpace, sid: uuid.UUID, text: str) -> None:
    await stub.PutSystemPrompt(
        storage_pb2.PutSystemPromptRequest(space_id=space.sid, session_id=str(sid), content=text)
    )


async def prompt_of(stub: Stub, space: TestSpace, sid: uuid.UUID) -> str | None:
    reply = await stub.GetSystemPrompt(
        storage_pb2.GetSystemPromptRequest(space_id=space.sid, session_id=str(sid))
    )
    return reply.content if reply.HasField("content") else None


class TestCopy:
    async def test_copies_the_source_prompt(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The child's slot becomes the source's (overwriting its own); copied = true."""
        source, child = await make_session(), await make_session()
        await put_prompt(stub, space, source, "be kind")
        await put_prompt(stub, space, child, "mine")
        reply = await stub.Transact(copy_request(space, child, source))
        assert reply.results[0].copy_system_prompt.copied
        assert await prompt_of(stub, space, child) == "be kind"
        assert await prompt_of(stub, space, source) == "be kind"

    @pytest.mark.parametrize("slot", [None, ""])
    async def test_a_source_without_prompt_copies_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, slot: str | None
    ) -> None:
        """No slot, or an empty one: the child keeps what it has; copied = false."""
        source, child = await make_session(), await make_session()
        if slot is not None:
            await put_prompt(stub, space, source, slot)
        await put_prompt(stub, space, child, "mine")
        reply = await stub.Transact(copy_request(space, child, source))
        assert not reply.results[0].copy_system_prompt.copied
        assert await prompt_of(stub, space, child) == "mine"


class TestRefused:
    @pytest.mark.parametrize(
        ("source", "field"),
        [
            ("nope", "operations[0].copy_system_prompt.source_id"),
            ("", "operations[0].copy_system_prompt.source_id"),
        ],
    )
    async def test_bad_source_names_the_field(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, source: str, field: str
    ) -> None:
        error = await rpc_error(stub.Transact(copy_request(space, await make_session(), source)))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [field]

    async def test_the_session_itself_is_no_source(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        child = await make_session()
        error = await rpc_error(stub.Transact(copy_request(space, child, child)))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [
            "operations[0].copy_system_prompt.source_id"
        ]

    @pytest.mark.parametrize("whose", ["unknown", "provisional", "foreign"])
    async def test_an_invisible_source_is_not_found_and_nothing_changes(
        self,
        stub: Stub,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
        whose: str,
    ) -> None:
        """NOT_FOUND naming no content of the source; the Transact's other writes roll back."""
        if whose == "unknown":
            source = uuid.uuid4()
        else:
            source = await make_session(
                provisional=whose == "provisional",
                space_id=other_space.id if whose == "foreign" else None,
            )
        child = await make_session()
        await put_prompt(stub, space, child, "mine")
        put = Op(put_system_prompt=Op.PutSystemPromptOp(session_id=str(child), content="new"))
        error = await rpc_error(stub.Transact(copy_request(space, child, source, put)))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert str(source) in (error.details() or "")
        assert await prompt_of(stub, space, child) == "mine"

    async def test_an_unknown_session_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        source = await make_session()
        await put_prompt(stub, space, source, "p")
        missing = uuid.uuid4()
        error = await rpc_error(stub.Transact(copy_request(space, missing, source)))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert str(missing) in (error.details() or "")
