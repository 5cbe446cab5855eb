"""Automatic compression at 80% of the context window (STELLO-SPEC §4.7, §6.2 items 54-67).

With DESIGN §5's overrides: the summary cache is keyed by the seq it covers
(§5.11) and stored by the turn's commit, TrimRecords clears it, compression
uses the gateway's provider (there is no per-session compressFn), and memory
is never in a context (§5.5).
"""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from agent_gateway.llm import LLMMessage
from agent_gateway.llm.prompt_texts import COMPRESSOR
from stello.agent.v1 import agent_pb2
from stello.errors import Unavailable
from tests.gateway.conftest import Stack, StackMaker, record, row_counts, rpc_error
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    compression_cache,
    put_insight,
    send,
    trim,
)
from tests.llm.support import ENGLISH, identity

pytestmark = pytest.mark.sql


async def seed(stack: Stack, session_id: str, count: int, size: int = 100) -> None:
    """`count` alternating user/assistant records of `size` characters."""
    roles = ("user", "assistant")
    await stack.append(
        session_id,
        *(record(roles[i % 2], f"{i:04d}" + "x" * (size - 4)) for i in range(count)),
    )


def non_system(messages: list[LLMMessage]) -> list[LLMMessage]:
    """The messages that are not system messages."""
    return [m for m in messages if m.role != "system"]


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

    async def test_overflow_compresses_with_own_provider(self, make_stack: StackMaker) -> None:
        """An overflow first asks the provider for a summary, then sends it in place of the
        old records, ending with the user message (items 55, 56, 63)."""
        spy = SpyProvider(max_context_tokens=50)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 40)
        await send(stack, root.id, "question")
        assert [c.compression for c in spy.calls] == [True, False]
        assert spy.calls[0].messages[0].content == ENGLISH.text(COMPRESSOR)
        cache = await compression_cache(stack, root.id)
        assert cache is not None and cache.covered_until_seq > 0
        turn = spy.turns[0].messages
        assert LLMMessage("system", cache.summary) in turn
        assert len(non_system(turn)) < 40
        assert turn[-1] == LLMMessage("user", "question")

    async def test_window_shift_recompresses(self, make_stack: StackMaker) -> None:
        """When the window moves, each turn compresses again (item 57)."""
        spy = SpyProvider(max_context_tokens=50)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 40)
        await send(stack, root.id, "one")
        await send(stack, root.id, "two")
        assert len(spy.compressions) == 2

    async def test_provider_prompt_tokens_count(self, make_stack: StackMaker) -> None:
        """The provider's reported prompt tokens of the last turn trigger compression (item 58).

        Twenty short records alone stay under 80 of 100 tokens; the 70 prompt
        tokens the provider reported, plus the newest records, do not.
        """
        spy = SpyProvider(max_context_tokens=100).then(answer("ok", prompt=70))
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 20, size=8)
        await send(stack, root.id, "hello there, friend")
        assert spy.compressions == []
        await send(stack, root.id, "hello there, again!")
        assert len(spy.compressions) == 1

    async def test_insight_then_summary_then_user(self, make_stack: StackMaker) -> None:
        """With an insight and an overflow: insight, then summary, then the user (59, 60)."""
        spy = SpyProvider(max_context_tokens=50)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 20)
        await put_insight(stack, root.id, "the insight")
        await send(stack, root.id, "question")
        cache = await compression_cache(stack, root.id)
        contents = [m.content for m in spy.turns[0].messages]
        assert contents.index("the insight") < contents.index(cache.summary)
        assert contents.index(cache.summary) < contents.index("question")
        assert len(contents) < 22

    async def test_memory_not_in_compressed_prompt(self, make_stack: StackMaker) -> None:
        """Memory is neither in the compressor's input nor in the real prompt (item 62)."""
        spy = SpyProvider(max_context_tokens=50)
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 20)
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
        spy = SpyProvider(max_context_tokens=50, helper_error=Unavailable("compressor down"))
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 20)
        before = await row_counts(pool, stack.space)
        error = await rpc_error(send(stack, root.id, "question"))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert await compression_cache(stack, root.id) is None
        assert await row_counts(pool, stack.space) == before
        assert spy.turns == []


class TestCache:
    """The summary cache, keyed by the seq it covers (DESIGN §5.11)."""

    async def huge_history(self, make_stack: StackMaker, spy: SpyProvider) -> tuple[Stack, str]:
        """Ten 1000-token records: three fit the window, seven are summarised (seqs 1..7)."""
        stack = await make_stack(spy)
        root = await stack.root()
        await seed(stack, root.id, 10, size=4000)
        return stack, root.id

    async def test_reused_while_window_stays(self, make_stack: StackMaker) -> None:
        """Turns whose window starts at the same seq reuse the summary: one compression (65)."""
        spy = SpyProvider(max_context_tokens=5000, max_reply_chars=400)
        stack, session = await self.huge_history(make_stack, spy)
        await send(stack, session, "a")
        first = await compression_cache(stack, session)
        assert first.covered_until_seq == 7
        await send(stack, session, "b")
        await send(stack, session, "c")
        assert len(spy.compressions) == 1
        assert await compression_cache(stack, session) == first
        assert all(LLMMessage("system", first.summary) in c.messages for c in spy.turns)

    async def test_recomputed_after_trim(self, make_stack: StackMaker) -> None:
        """TrimRecords clears the cache, so the next overflow summarises again."""
        spy = SpyProvider(max_context_tokens=5000, max_reply_chars=400)
        stack, session = await self.huge_history(make_stack, spy)
        await send(stack, session, "a")
        await send(stack, session, "b")
        assert await trim(stack, session, 8) == 6
        assert await compression_cache(stack, session) is None
        await send(stack, session, "c")
        assert len(spy.compressions) == 2
        cache = await compression_cache(stack, session)
        assert cache.covered_until_seq == 7
        assert len(spy.compressions[1].messages[1].content.splitlines()) == 2  # only seq 7

    async def test_shared_by_gateways(self, make_stack: StackMaker) -> None:
        """A summary stored through one gateway is reused by another (item 67)."""
        first_spy = SpyProvider(max_context_tokens=5000, max_reply_chars=400)
        stack, session = await self.huge_history(make_stack, first_spy)
        await send(stack, session, "a")
        second_spy = SpyProvider(max_context_tokens=5000, max_reply_chars=400)
        other = await make_stack(second_spy)
        await send(other, session, "b")
        assert second_spy.compressions == []
        cache = await compression_cache(stack, session)
        assert LLMMessage("system", cache.summary) in second_spy.turns[0].messages
