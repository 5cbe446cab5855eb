"""A model answer larger than a record may hold (DESIGN §4.3, explore10 F7).

The gateway caps an answer by max_tokens so that it fits a record; a provider
that ignores the cap can still answer more. The turn then fails on the model's
side, RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE in the caller's terms (never
storage's INVALID_ARGUMENT naming a field of its Transact), nothing of it is
stored, and the next turn works.
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.tools.base import MEMORY_REMEMBER
from stello.errors import error_info_metadata, error_info_reason
from stello.reasons import LLM_ANSWER_TOO_LARGE
from tests.gateway.conftest import Stack, StackMaker, row_counts, rpc_error
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    insight,
    put_insight,
    send,
    stream_events,
    submit,
    tool_call,
    tool_definition,
)

pytestmark = pytest.mark.sql

LIMIT = 1 << 20
"""STELLO_MAX_RECORD_BYTES by default."""
HUGE = "x" * (LIMIT + 1_000)
"""An answer no record can hold."""


async def unchanged_after(
    stack: Stack, pool: asyncpg.Pool, session_id: str, call: Any
) -> grpc.aio.AioRpcError:
    """Run a call that must fail with LLM_ANSWER_TOO_LARGE and write nothing; its error."""
    before = await row_counts(pool, stack.space)
    view = await stack.view(session_id)
    error = await rpc_error(call)
    assert (error.code(), error_info_reason(error)) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        LLM_ANSWER_TOO_LARGE,
    )
    details = error.details() or ""
    assert details.startswith("the model's answer is ")
    assert f"over the {LIMIT} bytes a record may hold; nothing of the turn was stored" in details
    assert "operations" not in details and "records[" not in details
    assert int(error_info_metadata(error)["answer_bytes"]) > LIMIT
    assert await row_counts(pool, stack.space) == before
    after = await stack.view(session_id)
    assert (after.turn_count, after.progress.last_seq) == (
        view.turn_count,
        view.progress.last_seq,
    )
    return error


class TestOversizedAnswer:
    """An answer over the record limit is the model's failure; nothing is stored."""

    async def test_send(
        self, make_stack: StackMaker, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Send: RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE with the sizes, no record, the
        insight kept, a WARNING naming the setting (not the text); the next Send works."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "first")
        await put_insight(stack, root.id, "a hint")
        spy.then(answer(HUGE))
        with caplog.at_level(logging.WARNING, logger="agent_gateway"):
            await unchanged_after(stack, pool, root.id, send(stack, root.id, "write a lot"))
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("STELLO_MAX_RECORD_BYTES" in line and root.id in line for line in said)
        assert not any("xxxxxxxx" in line for line in said)
        assert await insight(stack, root.id) == "a hint"
        reply = await send(stack, root.id, "again")
        assert reply.assistant.content == "echo: again"

    async def test_stream(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """SendStream: the same status after the answer's deltas; nothing stored."""
        spy = SpyProvider().then(answer(HUGE))
        stack = await make_stack(spy)
        root = await stack.root()
        await unchanged_after(stack, pool, root.id, stream_events(stack, root.id, "go"))
        assert (await send(stack, root.id, "again")).assistant.content == "echo: again"

    async def test_tool_call_arguments(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """A client tool call whose arguments make the record too large is refused the same
        way: no pending call is stored."""
        call = tool_call("lookup", "c1", query="q" * LIMIT)
        spy = SpyProvider().then(answer("", call))
        stack = await make_stack(spy)
        root = await stack.root()
        send_call = send(stack, root.id, "look", tools=[tool_definition("lookup")])
        await unchanged_after(stack, pool, root.id, send_call)
        assert (await send(stack, root.id, "again")).pending_tool_calls == []

    async def test_submit_tool_results(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """SubmitToolResults: the continuation's answer too large stores not even the
        results; the call can be answered again."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")), answer(HUGE))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "look", tools=[tool_definition("lookup")])
        await unchanged_after(stack, pool, root.id, submit(stack, root.id, ("c1", "found")))
        reply = await submit(stack, root.id, ("c1", "found"))
        assert reply.assistant.content == "tool results: lookup: found"

    async def test_a_builtin_call_too_large_is_not_run(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A built-in tool call in an answer too large to store is refused before it runs:
        the memory entry it asks for is not written (a built-in's writes would stay even
        though the turn fails), and the model is not called again."""
        call = tool_call(MEMORY_REMEMBER, "c1", slug="big", summary="s", body="b" * LIMIT)
        spy = SpyProvider().then(answer("", call))
        stack = await make_stack(spy)
        root = await stack.root()
        send_call = send(stack, root.id, "remember this", memory_tools=True)
        await unchanged_after(stack, pool, root.id, send_call)
        assert len(spy.calls) == 1
        entries = await pool.fetchval(
            "SELECT count(*) FROM shared_memory WHERE space_id = $1", stack.space.id
        )
        assert entries == 0
