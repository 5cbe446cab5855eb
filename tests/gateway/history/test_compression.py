"""Incremental, bounded compression with hysteresis (DESIGN §4.3, §5.14; STELLO-SPEC §6.2 54-67).

With DESIGN §5's overrides of spec §4.7: a turn compresses when its context
would reach 80% of the window, evicting the oldest records until those left
take at most 40%; the compressor folds the previous summary and the evicted
records (§5.14), in chunks that fit the window, at most three calls a turn; a
longer catch-up is lossy and completed by a background fold. Summaries are
kept by the seq they cover (§5.11) and stored by the turn's commit;
TrimRecords clears them; memory is never in a context (§5.5).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import asyncpg
import grpc
import pytest

from agent_gateway.history.budget import Calibration, Counter, Window
from agent_gateway.llm import LLMMessage
from agent_gateway.llm.prompts.texts import COMPRESSOR
from stello.agent.v1 import agent_pb2
from stello.errors import Unavailable, error_info_reason, field_violations
from stello.reasons import LLM_UNAVAILABLE
from tests.gateway.conftest import Stack, StackMaker, record, row_counts, rpc_error
from tests.gateway.llm.support import ENGLISH, identity
from tests.gateway.turns_support import (
    EMPTY_ANSWERS,
    SpyProvider,
    answer,
    compression_cache,
    put_insight,
    send,
    submit,
    tool_call,
    tool_definition,
    trim,
    wait_for,
)

pytestmark = pytest.mark.sql

WINDOW = 2_000
"""The provider's window: 23 of the 200-character records below reach its 80%."""
COUNT = Counter(Calibration())


async def seed(stack: Stack, session_id: str, count: int, size: int = 200) -> None:
    """`count` alternating user/assistant records of `size` characters, numbered."""
    roles = ("user", "assistant")
    await stack.append(
        session_id,
        *(record(roles[i % 2], f"{i:04d}" + "x" * (size - 4)) for i in range(count)),
    )


def numbers(messages: list[LLMMessage]) -> list[int]:
    """The record numbers of the seeded records among `messages`."""
    return [int(m.content[:4]) for m in messages if m.content[:4].isdigit()]


def transcript(call_messages: list[LLMMessage]) -> list[str]:
    """The transcript lines of a compressor call (after any previous summary block)."""
    content = call_messages[1].content.rsplit("</previous_summary>\n\n", 1)[-1]
    return content.split("Conversation:\n", 1)[1].splitlines()


def folded(call_messages: list[LLMMessage]) -> list[int]:
    """The record numbers on the transcript lines of a compressor call."""
    texts = [line.split(": ", 1)[1] for line in transcript(call_messages) if ": " in line]
    return [int(text[:4]) for text in texts if text[:4].isdigit()]


class TestTrigger:
    """When compression happens and what the turn then sends."""

    async def test_no_compression_below_threshold(self, make_stack: StackMaker) -> None:
        """With a large window the second prompt is identity, msg1, reply, msg2 (item 54)."""
        spy = SpyProvider(max_context_tokens=1_000_000)
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "msg1")
        await send(stack, root.id, "msg2")
        assert spy.turns[1].pairs() == [
            ("system", identity("Root")),
            ("user", "msg1"),
            ("assistant", "echo: msg1"),
            ("user", "msg2"),
        ]
        assert spy.compressions == []
        assert await compression_cache(stack, root.id) is None  # item 64

    async def test_overflow_folds_the_oldest_records(self, make_stack: StackMaker) -> None:
        """Over 80% the oldest records are folded (compressor prompt, transcript of exactly
        them), the turn sends the summary and the rest, ending with the user message; the
        summary is stored by the seq it covers (items 55, 56, 63)."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await send(stack, root.id, "question")
        assert spy.compressions and len(spy.compressions) <= 3
        assert all(c.messages[0].content == ENGLISH.text(COMPRESSOR) for c in spy.compressions)
        turn = spy.turns[0].messages
        cache = await compression_cache(stack, root.id)
        assert cache is not None and not cache.lossy
        evicted = [n for c in spy.compressions for n in folded(c.messages)]
        kept = numbers(turn)
        assert evicted + kept == list(range(30))
        assert cache.covered_until_seq == len(evicted)  # seq n + 1 holds record n
        assert turn[1] == LLMMessage("system", cache.summary)
        assert turn[-1] == LLMMessage("user", "question")
        window = Window(WINDOW, 1 << 20)
        assert COUNT.messages(turn[2:-1]) <= window.low_water
        assert COUNT.messages(turn) <= window.threshold

    async def test_every_call_fits_the_window(self, make_stack: StackMaker) -> None:
        """Each call's prompt and its max_tokens fit the window; summaries are capped."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 60)
        await send(stack, root.id, "question")
        window = Window(WINDOW, 1 << 20)
        for call in spy.calls:
            assert call.max_tokens is not None
            assert COUNT.messages(call.messages, call.tools or ()) + call.max_tokens <= WINDOW
        assert {c.max_tokens for c in spy.compressions} == {window.summary_tokens}

    async def test_hysteresis(self, make_stack: StackMaker) -> None:
        """After a compression the summary is reused, with no compressor call, until the
        records grow back past 80%: over 40 turns compressions stay rare.

        The bound: a compression leaves the records at most half the room the threshold
        leaves beside the rest (here the summary, identity and tool schemas take ~700 of the
        1,600), so ~450 tokens pass between two; a turn adds ~70, so at most one turn in six
        compresses, with at most three calls.
        """
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await send(stack, root.id, "first")
        first = await compression_cache(stack, root.id)
        calls_before = len(spy.calls)
        await send(stack, root.id, "second")
        assert len(spy.calls) == calls_before + 1
        assert await compression_cache(stack, root.id) == first
        for i in range(40):
            await send(stack, root.id, f"message {i} " + "y" * 80)
        runs: list[int] = []  # compressor calls before each turn call
        pending = 0
        for call in spy.calls[calls_before:]:
            if call.compression:
                pending += 1
            else:
                runs.append(pending)
                pending = 0
        compressing = [n for n in runs if n]
        assert 1 <= len(compressing) <= 41 // 6 + 1
        assert max(compressing) <= 3

    async def test_next_fold_starts_from_the_summary(self, make_stack: StackMaker) -> None:
        """The next compression folds the previous summary and the newly evicted records
        (DESIGN §5.14): [system prompt, user previous summary block + transcript]."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await send(stack, root.id, "first")
        first = await compression_cache(stack, root.id)
        count = len(spy.compressions)
        await seed(stack, root.id, 30)
        await send(stack, root.id, "second")
        fold = spy.compressions[count]
        assert fold.messages[1].content.startswith(
            f"<previous_summary>\n{first.summary}\n</previous_summary>\n\nConversation:\n"
        )
        assert folded(fold.messages)[0] == first.covered_until_seq  # the next seeded one

    async def test_insight_then_summary_then_user(self, make_stack: StackMaker) -> None:
        """With an insight and an overflow: insight, then summary, then the user (59, 60)."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await put_insight(stack, root.id, "the insight")
        await send(stack, root.id, "question")
        cache = await compression_cache(stack, root.id)
        contents = [m.content for m in spy.turns[0].messages]
        assert contents.index("the insight") < contents.index(cache.summary)
        assert contents.index(cache.summary) < contents.index("question")

    async def test_memory_not_in_compressed_prompt(self, make_stack: StackMaker) -> None:
        """Memory is neither in the compressor's input nor in the real prompt (item 62)."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=stack.space.sid, session_id=root.id, content="consolidated summary"
            )
        )
        await send(stack, root.id, "question")
        for call in spy.calls:
            assert not any("consolidated summary" in m.content for m in call.messages)
        cache = await compression_cache(stack, root.id)
        assert LLMMessage("system", cache.summary) in spy.turns[0].messages

    async def test_compressor_failure_writes_nothing(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A failing compression fails the turn with its error; no cache, no records (item 66)."""
        spy = SpyProvider(max_context_tokens=WINDOW, helper_error=Unavailable("compressor down"))
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        before = await row_counts(pool, stack.space)
        error = await rpc_error(send(stack, root.id, "question"))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert await compression_cache(stack, root.id) is None
        assert await row_counts(pool, stack.space) == before
        assert spy.turns == []

    @pytest.mark.parametrize("text", EMPTY_ANSWERS)
    async def test_an_empty_fold_keeps_the_summary(
        self, text: str, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A fold the model answers with no text (empty, or reasoning alone, closed or cut
        off) fails the turn as a provider failure does: UNAVAILABLE LLM_UNAVAILABLE, no
        record and no summary stored, the previous summary kept; the next turn folds the
        same records into it (explore10 F1: they had left every later context)."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await send(stack, root.id, "first")
        first = await compression_cache(stack, root.id)
        assert first is not None and first.summary
        await seed(stack, root.id, 30)
        before = await row_counts(pool, stack.space)
        turns, count = len(spy.turns), len(spy.compressions)
        spy.then_helper(answer(text))
        error = await rpc_error(send(stack, root.id, "second"))
        assert (error.code(), error_info_reason(error)) == (
            grpc.StatusCode.UNAVAILABLE,
            LLM_UNAVAILABLE,
        )
        assert await compression_cache(stack, root.id) == first
        assert await row_counts(pool, stack.space) == before
        assert len(spy.turns) == turns
        await send(stack, root.id, "second")
        failed, retried = spy.compressions[count], spy.compressions[count + 1]
        assert retried.messages[1].content.startswith(f"<previous_summary>\n{first.summary}\n")
        assert folded(retried.messages) == folded(failed.messages)
        after = await compression_cache(stack, root.id)
        assert after is not None and after.summary and after != first


class TestLimits:
    """What cannot fit the window is refused before anything is written."""

    async def test_message_over_half_the_window(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A message over half the window is INVALID_ARGUMENT on content; no call, no row."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        error = await rpc_error(send(stack, root.id, "z" * 3_100))  # ~1,034 tokens
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["content"]
        assert spy.calls == [] and await row_counts(pool, stack.space) == before
        assert (await send(stack, root.id, "z" * 2_800)).assistant.content  # ~934: accepted

    async def test_chinese_is_counted_per_character(self, make_stack: StackMaker) -> None:
        """CJK text counts a token a character: 1,100 characters are over half the window."""
        stack = await make_stack(SpyProvider(max_context_tokens=WINDOW))
        root = await stack.root()
        error = await rpc_error(send(stack, root.id, "字" * 1_100))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT

    async def test_tool_result_over_half_the_window(self, make_stack: StackMaker) -> None:
        """A client tool result over half the window is stored and sent as an error result."""
        spy = SpyProvider(max_context_tokens=WINDOW).then(answer("", tool_call("fetch", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[tool_definition("fetch")])
        reply = await submit(stack, root.id, ("c1", "r" * 4_000))
        tool = reply.records[0]
        assert tool.metadata.fields["is_error"].bool_value
        assert "more than half the model's window" in tool.content
        assert spy.turns[-1].messages[-1].is_error


class TestCache:
    """Summaries kept by the seq they cover (DESIGN §5.11)."""

    async def test_recomputed_after_trim(self, make_stack: StackMaker) -> None:
        """TrimRecords clears the summaries, so the next overflow folds again from none."""
        spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await send(stack, root.id, "a")
        assert await trim(stack, root.id, 28) > 0
        assert await compression_cache(stack, root.id) is None
        count = len(spy.compressions)
        await seed(stack, root.id, 10)
        await send(stack, root.id, "b")
        assert len(spy.compressions) > count
        assert spy.compressions[count].messages[1].content.startswith("Conversation:\n")

    async def test_shared_by_gateways(self, make_stack: StackMaker) -> None:
        """A summary stored through one gateway is reused by another (item 67)."""
        first_spy = SpyProvider(max_context_tokens=WINDOW)
        stack = await make_stack(first_spy)
        root = await stack.root()
        await seed(stack, root.id, 30)
        await send(stack, root.id, "a")
        second_spy = SpyProvider(max_context_tokens=WINDOW)
        other = await make_stack(second_spy)
        await send(other, root.id, "b")
        assert second_spy.compressions == []
        cache = await compression_cache(stack, root.id)
        assert LLMMessage("system", cache.summary) in second_spy.turns[0].messages


@dataclass(slots=True)
class HeldFold(SpyProvider):
    """A spy whose compression calls after the first three (the turn's) wait for `release`:
    the background fold cannot replace the turn's lossy summary before the test read it."""

    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def _wait(self) -> None:
        await SpyProvider._wait(self)
        if self.calls[-1].compression and len(self.compressions) > 3:
            await self.release.wait()


class TestCatchUp:
    """A tail longer than three compressor calls can fold (DESIGN §4.3)."""

    @pytest.mark.slow
    async def test_lossy_then_folded_in_the_background(self, make_stack: StackMaker) -> None:
        """The first turn after a long append makes three compressor calls, naming the older
        records by count; the background fold then stores a complete summary at that seq."""
        spy = HeldFold(max_context_tokens=WINDOW)
        # A budget that folds this backlog in one run (runs within a smaller budget:
        # test_background_jobs.py).
        stack = await make_stack(spy, fold_max_calls=1_000)
        root = await stack.root()
        await seed(stack, root.id, 300)
        await send(stack, root.id, "question")
        turn_calls = spy.calls[: spy.calls.index(spy.turns[0]) + 1]
        assert len([c for c in turn_calls if c.compression]) == 3
        omitted = int(transcript(spy.compressions[0].messages)[0].split(" ", 1)[0].lstrip("("))
        assert omitted > 0
        lossy = await compression_cache(stack, root.id)
        assert lossy is not None and lossy.lossy
        assert folded(spy.compressions[0].messages)[0] == omitted  # the records before: omitted
        spy.release.set()

        async def complete() -> bool:
            cache = await compression_cache(stack, root.id)
            return cache is not None and not cache.lossy

        await wait_for(complete, within_s=30)
        final = await compression_cache(stack, root.id)
        assert final.covered_until_seq == lossy.covered_until_seq
        background = spy.compressions[3:]
        assert folded(background[0].messages)[0] == 0
        assert [n for c in background for n in folded(c.messages)] == list(
            range(final.covered_until_seq)
        )
        await send(stack, root.id, "next")
        assert LLMMessage("system", final.summary) in spy.turns[-1].messages


class TestToolLoop:
    """The budget is rechecked before every model call of the tool loop."""

    async def test_results_that_overflow_compress_before_the_next_call(
        self, make_stack: StackMaker
    ) -> None:
        """A context just under 80% takes no compression; the built-in tool call and its
        result push it over, so the loop's next call compresses first; every call fits."""
        call = tool_call("stello_create_session", "c1", label="L" * 150)
        spy = SpyProvider(max_context_tokens=WINDOW).then(answer("probe"))
        stack = await make_stack(spy, builtin_tools=True)
        probe = await stack.root()
        await send(stack, probe.id, "fork please")
        base = COUNT.messages(spy.calls[0].messages, spy.calls[0].tools or ())
        threshold = Window(WINDOW, 1 << 20).threshold
        root = await stack.root()
        roles = ("user", "assistant")
        # Records of 8 characters count 7 tokens each (3 for the text, 4 per message).
        count = (threshold - base - 10) // 7
        await stack.append(root.id, *(record(roles[i % 2], f"{i:04d}abcd") for i in range(count)))
        spy.calls.clear()
        spy.then(answer("", call), answer("done"))
        reply = await send(stack, root.id, "fork please")
        assert reply.assistant.content == "done"
        kinds = ["compression" if c.compression else "turn" for c in spy.calls]
        assert kinds[0] == "turn" and kinds[-1] == "turn" and "compression" in kinds[1:-1]
        for made in spy.calls:
            prompt = COUNT.messages(made.messages, made.tools or ())
            assert prompt + (made.max_tokens or 0) <= WINDOW
