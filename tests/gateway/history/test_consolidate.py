"""Consolidate and the automatic consolidation every N turns (STELLO-SPEC §4.6, §6.8).

Restates §6.2 item 61, §6.6 item 10 and §6.8 items 1-5: the consolidator is
the gateway's provider with the configured prompt (English by default; no
per-session function, no role context in v1: DESIGN §5.13, §5.16), and
automatic failures are logged and counted rather than swallowed (DESIGN §6).
"""

from __future__ import annotations

import logging

import grpc
import pytest

from agent_gateway.llm.prompts.texts import COMPRESSOR, CONSOLIDATOR
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Unavailable, error_info_reason
from stello.reasons import LLM_ANSWER_TOO_LARGE, LLM_UNAVAILABLE
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Stack, StackMaker, new_id, record, rpc_error
from tests.gateway.llm.support import ENGLISH
from tests.gateway.turns_support import (
    EMPTY_ANSWERS,
    SpyProvider,
    answer,
    send,
    submit,
    tool_call,
    tool_definition,
    trim,
    wait_for,
)

pytestmark = pytest.mark.sql

FAILED = ("stello_gateway_auto_consolidations_total", {"outcome": "failed"})
SUCCEEDED = ("stello_gateway_auto_consolidations_total", {"outcome": "succeeded"})


async def consolidate(stack: Stack, session_id: str) -> str:
    """Consolidate; answers the new memory."""
    reply = await stack.gw.Consolidate(
        agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=session_id)
    )
    return str(reply.memory)


async def put_memory(stack: Stack, session_id: str, content: str) -> None:
    """PutMemory through the gateway."""
    await stack.gw.PutMemory(
        agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=session_id, content=content)
    )


async def stored_memory(stack: Stack, session_id: str) -> storage_pb2.GetMemoryResponse:
    """The memory as storage has it (content, covered seq, version)."""
    reply: storage_pb2.GetMemoryResponse = await stack.storage.GetMemory(
        storage_pb2.GetMemoryRequest(space_id=stack.space.sid, session_id=session_id)
    )
    return reply


async def consolidate_job(stack: Stack, session_id: str) -> common_pb2.BackgroundJob | None:
    """The session's consolidation job as GetSession's progress shows it."""
    for found in (await stack.view(session_id)).progress.jobs:
        if found.kind == common_pb2.JOB_KIND_CONSOLIDATE:
            return found
    return None


async def memory(stack: Stack, session_id: str) -> str | None:
    """The stored memory."""
    view = await stack.view(session_id)
    return view.memory if view.HasField("memory") else None


def counted(stack: Stack, sample: tuple[str, dict[str, str]]) -> float:
    """A sample of the gateway's metrics registry (0 when never counted)."""
    metrics = stack.gateway.app.metrics
    assert metrics is not None
    return metrics.registry.get_sample_value(*sample) or 0.0


class TestConsolidate:
    """The Consolidate RPC."""

    async def test_writes_memory_from_all_records(self, make_stack: StackMaker) -> None:
        """One LLM call over all records replaces the memory; nothing is trimmed (61; §6.6 10)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "one")
        await send(stack, root.id, "two")
        spy.then_helper(answer("Summary: 4 messages"))
        new = await consolidate(stack, root.id)
        assert new == "Summary: 4 messages" == await memory(stack, root.id)
        call = spy.calls[-1]
        assert call.messages[1].content.splitlines()[1:] == [
            "user: one",
            "assistant: echo: one",
            "user: two",
            "assistant: echo: two",
        ]
        assert len(spy.calls) == 3
        assert len(await stack.records(root.id)) == 4
        assert await trim(stack, root.id, 2) == 2
        assert len(await stack.records(root.id)) == 2

    async def test_default_prompt_messages(self, make_stack: StackMaker) -> None:
        """The consolidator sends [system prompt, user transcript], no role context (§6.8 1-3)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "hi")
        await consolidate(stack, root.id)
        assert spy.calls[-1].pairs() == [
            ("system", ENGLISH.text(CONSOLIDATOR)),
            ("user", "Conversation:\nuser: hi\nassistant: echo: hi"),
        ]

    async def test_current_memory_first(self, make_stack: StackMaker) -> None:
        """An existing memory goes before the transcript (spec §4.9 item 5)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=stack.space.sid, session_id=root.id, content="existing memory"
            )
        )
        await send(stack, root.id, "msg1")
        await consolidate(stack, root.id)
        assert spy.calls[-1].messages[1].content == (
            "Current summary:\nexisting memory\n\nConversation:\nuser: msg1\nassistant: echo: msg1"
        )

    @pytest.mark.parametrize("text", EMPTY_ANSWERS)
    async def test_an_empty_answer_keeps_the_memory(
        self, text: str, make_stack: StackMaker, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An answer with no text once its reasoning is removed (empty, blank, a closed or an
        unclosed <think> alone) is a failed call: UNAVAILABLE LLM_UNAVAILABLE, the memory a
        user put kept as it was (content, covered seq, version), the job FAILED, and a
        WARNING that says so without the model's text (explore10 F1)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await put_memory(stack, root.id, "IMPORTANT: allergic to peanuts")
        await send(stack, root.id, "hi")
        before = await stored_memory(stack, root.id)
        spy.then_helper(answer(text))
        with caplog.at_level(logging.WARNING, logger="agent_gateway"):
            error = await rpc_error(consolidate(stack, root.id))
        assert (error.code(), error_info_reason(error)) == (
            grpc.StatusCode.UNAVAILABLE,
            LLM_UNAVAILABLE,
        )
        assert "the model answered nothing to the consolidation" in (error.details() or "")
        assert await stored_memory(stack, root.id) == before
        assert before.content == "IMPORTANT: allergic to peanuts"
        state = await consolidate_job(stack, root.id)
        assert state is not None and state.status == common_pb2.JOB_STATUS_FAILED
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("the model answered" in line and root.id in line for line in said)
        assert not any("pondering" in line for line in said)

    async def test_an_empty_answer_over_the_memory_alone(self, make_stack: StackMaker) -> None:
        """With no new record the one call over the memory alone answering nothing keeps the
        memory too; the next consolidation, answered, replaces it."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await put_memory(stack, root.id, "kept")
        before = await stored_memory(stack, root.id)
        spy.then_helper(answer("<think>the memory says kept"))
        error = await rpc_error(consolidate(stack, root.id))
        assert error_info_reason(error) == LLM_UNAVAILABLE
        assert await stored_memory(stack, root.id) == before
        spy.then_helper(answer("<think>x</think>rewritten"))
        assert await consolidate(stack, root.id) == "rewritten"
        state = await consolidate_job(stack, root.id)
        assert state is not None and state.status == common_pb2.JOB_STATUS_DONE

    async def test_an_answer_over_the_slot_limit_keeps_the_memory(
        self, make_stack: StackMaker
    ) -> None:
        """An answer larger than a memory may hold (a provider ignoring max_tokens) is
        RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE naming its size, not storage's
        INVALID_ARGUMENT; the memory is kept and the job FAILED."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await put_memory(stack, root.id, "kept")
        await send(stack, root.id, "hi")
        before = await stored_memory(stack, root.id)
        spy.then_helper(answer("m" * (1 << 20) + "m"))
        error = await rpc_error(consolidate(stack, root.id))
        assert (error.code(), error_info_reason(error)) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            LLM_ANSWER_TOO_LARGE,
        )
        assert f"is {(1 << 20) + 1} bytes, over the {1 << 20} bytes" in (error.details() or "")
        assert await stored_memory(stack, root.id) == before
        state = await consolidate_job(stack, root.id)
        assert state is not None and state.status == common_pb2.JOB_STATUS_FAILED

    async def test_compressor_messages(self, make_stack: StackMaker) -> None:
        """The in-session compressor likewise sends [system prompt, user transcript] (§6.8 4)."""
        spy = SpyProvider(max_context_tokens=2_000)
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.append(root.id, *(record("user", f"{i:03d} " + "x" * 200) for i in range(30)))
        await send(stack, root.id, "second")
        compression = spy.compressions[0]
        assert [m.role for m in compression.messages] == ["system", "user"]
        assert compression.messages[0].content == ENGLISH.text(COMPRESSOR)
        assert compression.messages[1].content.startswith("Conversation:\nuser: 000 ")

    async def test_folds_only_what_is_new(self, make_stack: StackMaker) -> None:
        """The memory records the seq it covers: the next consolidation reads the memory and
        only the records after it (DESIGN §4.3)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "one")
        spy.then_helper(answer("memory one"))
        await consolidate(stack, root.id)
        await send(stack, root.id, "two")
        await consolidate(stack, root.id)
        assert spy.calls[-1].messages[1].content == (
            "Current summary:\nmemory one\n\nConversation:\nuser: two\nassistant: echo: two"
        )

    async def test_long_history_in_chunks(self, make_stack: StackMaker) -> None:
        """Records beyond one call's room are folded in chunks, the memory carried from one
        call to the next; each call fits the window."""
        spy = SpyProvider(max_context_tokens=2_000)
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.append(root.id, *(record("user", f"{i:03d} " + "x" * 200) for i in range(40)))
        await consolidate(stack, root.id)
        calls = [c for c in spy.calls if c.helper]
        assert len(calls) >= 2
        lines = [
            line[6:9]
            for c in calls
            for line in c.messages[1].content.rsplit("Conversation:\n", 1)[1].splitlines()
        ]
        assert lines == [f"{i:03d}" for i in range(40)]
        assert calls[1].messages[1].content.startswith("Current summary:\n")
        assert all(c.max_tokens == 250 for c in calls)

    async def test_nothing_to_fold_calls_no_model(self, make_stack: StackMaker) -> None:
        """A session with neither memory nor records answers DONE with no model call and its
        memory left unset (explore2 finding 13); with a memory and no new record, one call
        over the memory alone."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await stack.gw.Consolidate(
            agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=root.id)
        )
        assert (reply.status, reply.model_calls, reply.HasField("memory")) == (
            common_pb2.JOB_STATUS_DONE,
            0,
            False,
        )
        assert spy.calls == [] and await memory(stack, root.id) is None
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=root.id, content="m")
        )
        spy.then_helper(answer("m2"))
        reply = await stack.gw.Consolidate(
            agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=root.id)
        )
        assert (reply.model_calls, reply.memory, len(spy.calls)) == (1, "m2", 1)

    async def test_archived(self, make_stack: StackMaker) -> None:
        """An archived session is FAILED_PRECONDITION SESSION_ARCHIVED; memory unchanged."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        error = await rpc_error(consolidate(stack, root.id))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "SESSION_ARCHIVED"
        assert spy.calls == [] and await memory(stack, root.id) is None

    async def test_unknown_session(self, make_stack: StackMaker) -> None:
        """An unknown session is NOT_FOUND."""
        stack = await make_stack(SpyProvider())
        error = await rpc_error(consolidate(stack, new_id()))
        assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_provider_failure(self, make_stack: StackMaker) -> None:
        """A provider failure answers its status and leaves the memory as it was."""
        spy = SpyProvider(helper_error=Unavailable("down"))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "hi")
        error = await rpc_error(consolidate(stack, root.id))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert await memory(stack, root.id) is None


class TestAutomatic:
    """Consolidation after every N committed turns (spec §4.6, DESIGN §6)."""

    async def test_every_n_turns(self, make_stack: StackMaker) -> None:
        """With N = 2 the memory is written after the second turn, not the first."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy, consolidate_every_n_turns=2)
        root = await stack.root()
        await send(stack, root.id, "one", tools=[tool_definition("lookup")])
        await submit(stack, root.id, ("c1", "r"))  # a continuation is not a turn
        assert await memory(stack, root.id) is None
        await send(stack, root.id, "two")
        await wait_for(lambda: counted(stack, SUCCEEDED) == 1)
        written = await memory(stack, root.id)
        assert written is not None and written.startswith("echo: Conversation:")
        assert counted(stack, FAILED) == 0

    async def test_failure_is_counted(self, make_stack: StackMaker) -> None:
        """A failing automatic consolidation is counted and logged; the turn is unaffected."""
        spy = SpyProvider(helper_error=Unavailable("consolidator down"))
        stack = await make_stack(spy, consolidate_every_n_turns=1)
        root = await stack.root()
        reply = await send(stack, root.id, "one")
        assert reply.assistant.content == "echo: one"
        await wait_for(lambda: counted(stack, FAILED) == 1)
        assert counted(stack, SUCCEEDED) == 0
        assert await memory(stack, root.id) is None
        assert (await stack.view(root.id)).turn_count == 1

    async def test_an_empty_answer_is_a_failure(self, make_stack: StackMaker) -> None:
        """An automatic consolidation the model answers with nothing is counted as failed
        and keeps the memory; the turn is unaffected."""
        spy = SpyProvider().then_helper(answer("<think>only this"))
        stack = await make_stack(spy, consolidate_every_n_turns=1)
        root = await stack.root()
        await put_memory(stack, root.id, "kept")
        before = await stored_memory(stack, root.id)
        reply = await send(stack, root.id, "one")
        assert reply.assistant.content == "echo: one"
        await wait_for(lambda: counted(stack, FAILED) == 1)
        assert counted(stack, SUCCEEDED) == 0
        assert await stored_memory(stack, root.id) == before
        state = await consolidate_job(stack, root.id)
        assert state is not None and state.status == common_pb2.JOB_STATUS_FAILED

    async def test_off_by_default(self, make_stack: StackMaker) -> None:
        """Without N no consolidation runs."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        for text in ("a", "b", "c"):
            await send(stack, root.id, text)
        assert not any(call.helper for call in spy.calls)
