"""A model answer with nothing in it (DESIGN §4.2, §4.3).

An answer with no tool call and no text once its reasoning is removed is a
failed model call, as it is for Consolidate: UNAVAILABLE LLM_UNAVAILABLE,
nothing of the turn stored (never an empty assistant record, which the
Anthropic mapping would leave out of later contexts), the insight kept and
the lease released, so the same request runs again.
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import grpc
import pytest

from stello.errors import error_info_reason
from stello.reasons import LLM_UNAVAILABLE
from tests.gateway.conftest import Stack, StackMaker, row_counts, rpc_error
from tests.gateway.turns_support import (
    EMPTY_ANSWERS,
    SpyProvider,
    answer,
    insight,
    put_insight,
    roles,
    send,
    stream_events,
    submit,
    tool_call,
    tool_definition,
)

pytestmark = pytest.mark.sql


async def refused(stack: Stack, pool: asyncpg.Pool, session_id: str, call: Any) -> None:
    """Run a call that must fail with LLM_UNAVAILABLE, saying the model answered nothing,
    and write nothing."""
    before = await row_counts(pool, stack.space)
    last_seq = (await stack.view(session_id)).progress.last_seq
    error = await rpc_error(call)
    assert (error.code(), error_info_reason(error)) == (
        grpc.StatusCode.UNAVAILABLE,
        LLM_UNAVAILABLE,
    )
    assert (error.details() or "").startswith("the model answered nothing")
    assert "nothing of the turn was stored" in (error.details() or "")
    assert await row_counts(pool, stack.space) == before
    assert (await stack.view(session_id)).progress.last_seq == last_seq


class TestEmptyAnswer:
    """A turn whose model answers nothing fails and stores nothing; a retry runs."""

    @pytest.mark.parametrize("text", EMPTY_ANSWERS)
    async def test_send(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        caplog: pytest.LogCaptureFixture,
        text: str,
    ) -> None:
        """Send: UNAVAILABLE LLM_UNAVAILABLE, no record, the insight kept, a WARNING saying
        what the answer held (not its text); the same request_id then runs the turn."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await put_insight(stack, root.id, "a hint")
        spy.then(answer(text))
        with caplog.at_level(logging.WARNING, logger="agent_gateway"):
            await refused(stack, pool, root.id, send(stack, root.id, "hi", request_id="r1"))
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("answered" in line and root.id in line for line in said)
        assert not any("pondering" in line for line in said)
        assert await insight(stack, root.id) == "a hint"
        reply = await send(stack, root.id, "hi", request_id="r1")
        assert reply.assistant.content == "echo: hi"
        assert roles(await stack.records(root.id)) == ["user", "assistant"]

    async def test_stream(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """SendStream: the same status after whatever deltas were sent; nothing stored."""
        spy = SpyProvider().then(answer("<think>pondering</think>"))
        stack = await make_stack(spy)
        root = await stack.root()
        await refused(stack, pool, root.id, stream_events(stack, root.id, "go"))
        assert (await send(stack, root.id, "again")).assistant.content == "echo: again"

    async def test_submit_tool_results(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """SubmitToolResults: an empty continuation stores not even the results; they can
        be submitted again."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")), answer(""))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "look", tools=[tool_definition("lookup")])
        await refused(stack, pool, root.id, submit(stack, root.id, ("c1", "found")))
        reply = await submit(stack, root.id, ("c1", "found"))
        assert reply.assistant.content == "tool results: lookup: found"

    async def test_a_tool_call_alone_is_an_answer(self, make_stack: StackMaker) -> None:
        """An answer with no text but a tool call is an answer: its pending call is stored."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await send(stack, root.id, "look", tools=[tool_definition("lookup")])
        assert [call.id for call in reply.pending_tool_calls] == ["c1"]
        assert roles(await stack.records(root.id)) == ["user", "assistant"]
