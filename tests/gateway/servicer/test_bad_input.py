"""Refused CreateRoot and Fork requests: a clear status and nothing written."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from tests.gateway.conftest import (
    Stack,
    close_stack,
    new_id,
    open_stack,
    record,
    row_counts,
    rpc_error,
)
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture(name="source")
async def _source(stack: Stack) -> str:
    root = await stack.root(label="source")
    await stack.append(root.id, record("user", "q"))
    return root.id


async def refused(
    stack: Stack, pool: asyncpg.Pool, call: Any, code: grpc.StatusCode
) -> grpc.aio.AioRpcError:
    """Run `call`, expect `code`, and check no row was written and no summary was made."""
    before = await row_counts(pool, stack.space)
    error = await rpc_error(call)
    assert error.code() is code, error
    assert await row_counts(pool, stack.space) == before
    assert stack.summarizer.calls == []
    return error


def fork(stack: Stack, source: str, **fields: Any) -> agent_pb2.ForkRequest:
    """A ForkRequest in the stack's space (label 'child' unless given)."""
    fields = {"label": "child", "source_session_id": source, **fields}
    return agent_pb2.ForkRequest(space_id=stack.space.sid, **fields)


class TestProfiles:
    """Unknown profiles and missing template variables."""

    async def test_unknown_profile(self, stack: Stack, pool: asyncpg.Pool, source: str) -> None:
        """An unknown profile is FAILED_PRECONDITION PROFILE_NOT_FOUND, for Fork and CreateRoot."""
        error = await refused(
            stack,
            pool,
            stack.gw.Fork(
                fork(stack, source, profile="nope", context=common_pb2.FORK_CONTEXT_COMPRESS)
            ),
            grpc.StatusCode.FAILED_PRECONDITION,
        )
        assert error_info_reason(error) == "PROFILE_NOT_FOUND"
        root = agent_pb2.CreateRootRequest(space_id=stack.space.sid, profile="nope")
        error = await refused(
            stack, pool, stack.gw.CreateRoot(root), grpc.StatusCode.FAILED_PRECONDITION
        )
        assert error_info_reason(error) == "PROFILE_NOT_FOUND"

    async def test_an_unknown_profile_of_any_length(
        self, stack: Stack, pool: asyncpg.Pool, source: str
    ) -> None:
        """An unknown profile name of 20,000 characters is PROFILE_NOT_FOUND quoting its first
        64: echoed whole (in the message and the details), the trailers passed gRPC's
        metadata limit and the client saw RESOURCE_EXHAUSTED "Stream removed" instead."""
        name = "p" * 20_000
        root = agent_pb2.CreateRootRequest(space_id=stack.space.sid, profile=name)
        for call in (
            stack.gw.CreateRoot(root),
            stack.gw.Fork(fork(stack, source, profile=name)),
        ):
            error = await refused(stack, pool, call, grpc.StatusCode.FAILED_PRECONDITION)
            assert error_info_reason(error) == "PROFILE_NOT_FOUND"
            assert (error.details() or "").startswith(f"fork profile '{'p' * 61}…' is not")

    async def test_missing_template_variable(
        self, stack: Stack, pool: asyncpg.Pool, source: str
    ) -> None:
        """A template variable missing from profile_vars is INVALID_ARGUMENT naming it."""
        call = stack.gw.Fork(fork(stack, source, profile="research", profile_vars={"topic": "t"}))
        error = await refused(stack, pool, call, INVALID)
        assert "region" in (error.details() or "")
        assert [v.field for v in field_violations(error)] == ["profile_vars"]


class TestLabelsAndIds:
    """Labels, ids, options and the request_id."""

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            pytest.param({"label": ""}, "label", id="empty-label"),
            pytest.param({"label": "x" * 201}, "label", id="long-label"),
            pytest.param({"label": "a\x1b[31mred"}, "label", id="escape-in-label"),
            pytest.param({"label": "line1\nline2"}, "label", id="line-break-in-label"),
            pytest.param({"source_session_id": "nope"}, "source_session_id", id="bad-source"),
            pytest.param({"topology_parent_id": "nope"}, "topology_parent_id", id="bad-parent"),
            pytest.param(
                {"inherit_until_seq": -1, "context": 2}, "inherit_until_seq", id="neg-seq"
            ),
            pytest.param({"inherit_until_seq": 1}, "inherit_until_seq", id="seq-without-inherit"),
            pytest.param({"request_id": "r" * 201}, "request_id", id="long-request-id"),
            pytest.param(
                {"skills": common_pb2.SkillList(names=["ok", "bad name!"])},
                "skills.names[1]",
                id="bad-skill-name",
            ),
        ],
    )
    async def test_invalid_fork(
        self, stack: Stack, pool: asyncpg.Pool, source: str, fields: dict[str, Any], field: str
    ) -> None:
        """Each malformed Fork field is INVALID_ARGUMENT with a violation naming it."""
        request = fork(stack, source, **fields)
        error = await refused(stack, pool, stack.gw.Fork(request), INVALID)
        assert field in [v.field for v in field_violations(error)]

    async def test_invalid_root_skill_name(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """CreateRoot with a skill name no skill can have is INVALID_ARGUMENT naming it (it
        was stored, and the session matched no skill without a word)."""
        request = agent_pb2.CreateRootRequest(
            space_id=stack.space.sid, skills=common_pb2.SkillList(names=["", "x" * 65])
        )
        error = await refused(stack, pool, stack.gw.CreateRoot(request), INVALID)
        assert [v.field for v in field_violations(error)] == ["skills.names[0]", "skills.names[1]"]

    async def test_invalid_root_label(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """CreateRoot with a label set but empty is INVALID_ARGUMENT (unset means 'Root')."""
        request = agent_pb2.CreateRootRequest(space_id=stack.space.sid, label="")
        error = await refused(stack, pool, stack.gw.CreateRoot(request), INVALID)
        assert [v.field for v in field_violations(error)] == ["label"]

    async def test_unknown_source(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A source that does not exist is NOT_FOUND."""
        await refused(stack, pool, stack.gw.Fork(fork(stack, new_id())), grpc.StatusCode.NOT_FOUND)

    async def test_unknown_parent_before_any_summary(
        self, stack: Stack, pool: asyncpg.Pool, source: str
    ) -> None:
        """An unknown topology parent is NOT_FOUND before the COMPRESS summary is made."""
        request = fork(
            stack,
            source,
            topology_parent_id=new_id(),
            context=common_pb2.FORK_CONTEXT_COMPRESS,
        )
        await refused(stack, pool, stack.gw.Fork(request), grpc.StatusCode.NOT_FOUND)

    async def test_foreign_source_and_space(
        self, stack: Stack, pool: asyncpg.Pool, other_space: TestSpace
    ) -> None:
        """Another space's session, or another space's id, is NOT_FOUND (existence never leaks)."""
        other = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        try:
            foreign = await other.root()
            theirs = await row_counts(pool, other_space)
            not_found = grpc.StatusCode.NOT_FOUND
            await refused(stack, pool, stack.gw.Fork(fork(stack, foreign.id)), not_found)
            request = agent_pb2.ForkRequest(
                space_id=other_space.sid, source_session_id=foreign.id, label="x"
            )
            await refused(stack, pool, stack.gw.Fork(request), not_found)
            assert await row_counts(pool, other_space) == theirs
        finally:
            await close_stack(other)

    async def test_no_key(self, stack: Stack, pool: asyncpg.Pool, source: str) -> None:
        """A call without a key is UNAUTHENTICATED."""
        async with stack.gateway.channel() as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            await refused(
                stack, pool, stub.Fork(fork(stack, source)), grpc.StatusCode.UNAUTHENTICATED
            )


class TestEnumValues:
    """A number no enum has is refused naming the values the field takes, in the SDK's words
    (they said "is not a BusyPolicy value: 99", "unknown ForkContext value 99", ...)."""

    @pytest.mark.parametrize(
        ("rpc", "fields", "field", "values"),
        [
            pytest.param(
                "Send",
                {"content": "hi", "busy": 99},
                "busy",
                "reject, enqueue, interrupt, rollback",
                id="busy",
            ),
            pytest.param("Fork", {"context": 99}, "context", "none, inherit, compress", id="fork"),
            pytest.param(
                "ListSessionDigests", {"status": 9}, "status", "active, archived", id="st"
            ),
            pytest.param(
                "ImportSession", {"label": "i", "status": 9}, "status", "active, archived", id="imp"
            ),
        ],
    )
    async def test_an_unknown_number_lists_the_values(
        self,
        stack: Stack,
        pool: asyncpg.Pool,
        source: str,
        rpc: str,
        fields: dict[str, Any],
        field: str,
        values: str,
    ) -> None:
        """INVALID_ARGUMENT naming the field, the values and the number given; nothing written."""
        requests: dict[str, Any] = {
            "Send": agent_pb2.SendRequest,
            "Fork": agent_pb2.ForkRequest,
            "ListSessionDigests": agent_pb2.ListSessionDigestsRequest,
            "ImportSession": agent_pb2.ImportSessionRequest,
        }
        ids = {"session_id": source} if rpc == "Send" else {}
        ids = {"source_session_id": source, "label": "c"} if rpc == "Fork" else ids
        request = requests[rpc](space_id=stack.space.sid, **ids, **fields)
        error = await refused(stack, pool, getattr(stack.gw, rpc)(request), INVALID)
        number = fields[field]
        assert [(v.field, v.description) for v in field_violations(error)] == [
            (field, f"must be one of {values}, got {number}")
        ]
