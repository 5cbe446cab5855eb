"""Issue #13 through the gateway: hostile input refused up front, limits before any write or
model call, the caller's deadline on long calls, and no internals in any reply."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.settings import MIB
from tests.gateway.conftest import GatewayStarter, Stack, StackMaker, open_stack, record, rpc_error
from tests.gateway.turns_support import SpyProvider, send, tool_definition
from tests.support.fixtures import TestSpace
from tests.support.hostile import MARKER, invalid_utf8, nested_struct
from tests.support.rows import space_rows

pytestmark = pytest.mark.sql

INVALID = grpc.StatusCode.INVALID_ARGUMENT
LEAKS = re.compile(r"Traceback|debug_error_string|AioRpcError|Unexpected <class|asyncpg|SELECT")


async def refused(stack: Stack, pool: asyncpg.Pool, spy: SpyProvider, call: Any) -> Any:
    """Await a call that must fail; check no model was called and no row of the space changed."""
    before = await space_rows(pool, stack.space.id)
    calls = len(spy.calls)
    error = await rpc_error(call)
    assert len(spy.calls) == calls, "the model was called"
    assert await space_rows(pool, stack.space.id) == before
    assert not LEAKS.search(error.details() or ""), error.details()
    return error


@pytest.fixture(name="spy")
def _spy() -> SpyProvider:
    return SpyProvider()


@pytest.fixture(name="guarded")
async def _guarded(make_stack: StackMaker, spy: SpyProvider) -> Stack:
    return await make_stack(spy)


class TestTextNoStoreCanHold:
    """Finding 2: U+0000 anywhere is INVALID_ARGUMENT naming the field, before the model."""

    @pytest.mark.parametrize(
        ("fields", "violation"),
        [
            pytest.param({"content": "a\x00b"}, "content", id="content"),
            pytest.param({"request_id": "r\x00"}, "request_id", id="request-id"),
            pytest.param(
                {"tools": [tool_definition("t", "d\x00")]}, "tools[0].description", id="tool"
            ),
            pytest.param(
                {"tools": [tool_definition("t", "d", type="object", title="\x00")]},
                "tools[0].parameters",
                id="tool-parameters",
            ),
        ],
    )
    async def test_send(
        self,
        guarded: Stack,
        pool: asyncpg.Pool,
        spy: SpyProvider,
        fields: dict[str, Any],
        violation: str,
    ) -> None:
        """A Send with U+0000 in any field answers INVALID_ARGUMENT on it; no model call."""
        root = await guarded.root()
        fields = {"content": "hi", **fields}
        error = await refused(guarded, pool, spy, send(guarded, root.id, **fields))
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == [violation]

    @pytest.mark.parametrize(
        ("fields", "violation"),
        [
            pytest.param({"label": "L\x00"}, "label", id="label"),
            pytest.param({"system_prompt": "\x00"}, "system_prompt", id="system-prompt"),
            pytest.param(
                {"profile": "research", "profile_vars": {"topic": "\x00", "region": "r"}},
                "profile_vars['topic']",
                id="profile-var",
            ),
            pytest.param(
                {"skills": common_pb2.SkillList(names=["\x00"])}, "skills.names[0]", id="skills"
            ),
        ],
    )
    async def test_create_root(
        self,
        guarded: Stack,
        pool: asyncpg.Pool,
        spy: SpyProvider,
        fields: dict[str, Any],
        violation: str,
    ) -> None:
        """A CreateRoot with U+0000 in any field answers INVALID_ARGUMENT; nothing is written."""
        request = agent_pb2.CreateRootRequest(space_id=guarded.space.sid, **fields)
        error = await refused(guarded, pool, spy, guarded.gw.CreateRoot(request))
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == [violation]


class TestUnparsable:
    """Finding 4: bytes that do not parse are INVALID_ARGUMENT on every RPC (here Send)."""

    async def test_invalid_utf8_send(
        self, guarded: Stack, pool: asyncpg.Pool, spy: SpyProvider
    ) -> None:
        """A Send whose content is not UTF-8 is INVALID_ARGUMENT on content; no model call."""
        root = await guarded.root()
        data = invalid_utf8(
            agent_pb2.SendRequest(space_id=guarded.space.sid, session_id=root.id, content=MARKER)
        )
        raw: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = guarded.channels[0].unary_unary(
            "/stello.agent.v1.AgentGateway/Send"
        )
        error = await refused(guarded, pool, spy, raw(data))
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == ["content"]


class TestPoisonRecord:
    """Finding 5: metadata too deep for later reads is refused when written."""

    async def test_deep_metadata_refused_and_sixteen_levels_fork(self, stack: Stack) -> None:
        """Metadata of 34 levels is refused; 16 levels is stored and survives Fork INHERIT."""
        root = await stack.root()
        error = await rpc_error(
            stack.append(root.id, record("user", "x", metadata=nested_struct(34)))
        )
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == ["records[0].metadata"]
        deep = nested_struct(16)
        await stack.append(root.id, record("user", "x", metadata=deep))
        child = await stack.fork(root.id, context=common_pb2.FORK_CONTEXT_INHERIT)
        (inherited,) = await stack.records(child.id)
        assert inherited.metadata == deep


class TestLimitsBeforeWrites:
    """Finding 6: what storage would refuse is refused first, on the client's own fields."""

    async def test_send_at_the_content_limit(
        self, guarded: Stack, pool: asyncpg.Pool, spy: SpyProvider
    ) -> None:
        """Content exactly at the content limit makes a record over storage's: refused on
        `content` before the model is called."""
        root = await guarded.root()
        error = await refused(guarded, pool, spy, send(guarded, root.id, "x" * MIB))
        assert error.code() is INVALID
        (violation,) = field_violations(error)
        assert violation.field == "content"
        assert "record" in violation.description

    async def test_create_root_system_prompt_over_the_slot(
        self, guarded: Stack, pool: asyncpg.Pool, spy: SpyProvider
    ) -> None:
        """A 1 MiB + 1 system prompt writes no row, config or idempotency key."""
        request = agent_pb2.CreateRootRequest(
            space_id=guarded.space.sid, system_prompt="p" * (MIB + 1), request_id="big"
        )
        error = await refused(guarded, pool, spy, guarded.gw.CreateRoot(request))
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == ["system_prompt"]

    async def test_fork_prompts_over_the_limits(
        self, guarded: Stack, pool: asyncpg.Pool, spy: SpyProvider
    ) -> None:
        """A Fork's system prompt over the slot and opening prompt over the record are refused."""
        root = await guarded.root()
        request = agent_pb2.ForkRequest(
            space_id=guarded.space.sid,
            source_session_id=root.id,
            label="child",
            system_prompt="p" * (MIB + 1),
            prompt="q" * MIB,
        )
        error = await refused(guarded, pool, spy, guarded.gw.Fork(request))
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == ["system_prompt", "prompt"]

    async def test_profile_composition_over_the_slot(
        self, make_stack: StackMaker, pool: asyncpg.Pool, spy: SpyProvider
    ) -> None:
        """A system prompt that only the profile's template makes too long is refused on
        `system_prompt` before any write."""
        stack = await make_stack(spy)
        request = agent_pb2.CreateRootRequest(
            space_id=stack.space.sid,
            profile="research",
            profile_vars={"topic": "t" * MIB, "region": "r"},
        )
        error = await refused(stack, pool, spy, stack.gw.CreateRoot(request))
        assert error.code() is INVALID
        (violation,) = field_violations(error)
        assert violation.field == "system_prompt"
        assert "as composed" in violation.description


class TestCallerDeadline:
    """Finding 7: a long internal call gets the caller's deadline, not a fixed internal one."""

    @pytest.fixture(name="slow_stack")
    async def _slow_stack(
        self, start_gateway: GatewayStarter, stack: Stack, space: TestSpace
    ) -> AsyncIterator[Stack]:
        gateway = await start_gateway(call_timeout_s=0.3)
        slow = await open_stack(stack.backends, gateway, space, stack.summarizer)
        yield slow
        for channel in slow.channels:
            await channel.close()

    async def test_delete_session_outlasts_the_call_timeout(
        self, slow_stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """DeleteSession that takes longer than call_timeout_s finishes within the caller's
        deadline (the subtree is held locked for 1.5 s)."""
        root = await slow_stack.root()
        child = await slow_stack.fork(root.id)
        async with pool.acquire() as con, con.transaction():
            await con.execute(
                "SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2 FOR UPDATE",
                slow_stack.space.id,
                uuid.UUID(child.id),
            )
            deleting = asyncio.ensure_future(
                slow_stack.gw.DeleteSession(
                    agent_pb2.DeleteSessionRequest(
                        space_id=slow_stack.space.sid, session_id=root.id
                    ),
                    timeout=60,
                )
            )
            await asyncio.sleep(1.5)
        reply = await deleting
        assert set(reply.deleted_ids) == {root.id, child.id}


class _Failing(grpc.GenericRpcHandler):
    """Answers every call with `code` and a text no client should see."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        code = self._code

        async def fail(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            await context.abort(code, "asyncpg said: SELECT secret FROM internals")
            raise AssertionError("unreachable")

        return grpc.unary_unary_rpc_method_handler(fail)


@pytest.fixture(name="failing_storage")
async def _failing_storage(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_Failing(request.param),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


class TestNoInternals:
    """What storage or tree answer reaches the client as a plain status, never their text."""

    @pytest.mark.parametrize(
        "failing_storage",
        [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS],
        indirect=True,
        ids=["internal", "unknown", "data-loss"],
    )
    async def test_storage_internal_error(
        self,
        start_gateway: GatewayStarter,
        stack: Stack,
        space: TestSpace,
        failing_storage: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A storage answering INTERNAL (or an unmapped code) makes the gateway answer INTERNAL
        with its own error id; the storage's text is in the gateway's log only."""
        gateway = await start_gateway(storage_address=failing_storage)
        broken = await open_stack(stack.backends, gateway, space, stack.summarizer)
        root = await stack.root()
        try:
            error = await rpc_error(
                broken.gw.GetSession(
                    agent_pb2.GetSessionRequest(space_id=space.sid, session_id=root.id)
                )
            )
        finally:
            for channel in broken.channels:
                await channel.close()
        assert error.code() is grpc.StatusCode.INTERNAL
        matched = re.fullmatch(r"internal error \(id ([0-9a-f]+)\)", error.details() or "")
        assert matched, error.details()
        assert matched.group(1) in caplog.text
        assert "SELECT secret" in caplog.text

    async def test_storage_unreachable(
        self, start_gateway: GatewayStarter, stack: Stack, space: TestSpace
    ) -> None:
        """An unreachable storage is UNAVAILABLE naming the hop, without transport text."""
        gateway = await start_gateway(storage_address="127.0.0.1:1", max_retries=0)
        broken = await open_stack(stack.backends, gateway, space, stack.summarizer)
        root = await stack.root()
        try:
            error = await rpc_error(
                broken.gw.GetSession(
                    agent_pb2.GetSessionRequest(space_id=space.sid, session_id=root.id)
                )
            )
        finally:
            for channel in broken.channels:
                await channel.close()
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        details = error.details() or ""
        assert details.startswith("SessionStorage."), details
        assert "failed to connect" not in details, details
        assert "ipv4" not in details, details
