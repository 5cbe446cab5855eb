"""Context assembly: order, sanitisation, compression and its seq-keyed cache (spec §4.5, §4.7)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import pytest

from agent_gateway.context import (
    AssembledContext,
    CompressionCache,
    Compressor,
    Record,
    assemble_context,
    remove_incomplete_tool_groups,
)
from agent_gateway.llm import LLMMessage, Role, ToolCallSpec, compress_records
from agent_gateway.llm.prompt_texts import COMPRESSOR
from tests.llm.support import (
    CHINESE,
    ENGLISH,
    SpyProvider,
    answer,
    calls,
    history,
    identity,
    long_records,
)

IDENTITY_战略规划 = "<session_identity>\n你当前在「战略规划」子会话中。\n</session_identity>"
"""The spec's identity text (§4.5.1 row 3), as the zh preset gives it."""


class SpyCompressor:
    """A compressor that records what it was asked to summarise."""

    def __init__(self, summary: str = "SUMMARY") -> None:
        self.summary = summary
        self.calls: list[list[Record]] = []

    async def __call__(self, records: Sequence[Record]) -> str:
        self.calls.append(list(records))
        return self.summary


async def never(records: Sequence[Record]) -> str:
    raise AssertionError("the compressor must not be called")


async def assemble(
    history: Sequence[Record] = (),
    user_message: str | None = "hello",
    *,
    compress: Compressor = never,
    **overrides: Any,
) -> AssembledContext:
    """assemble_context with harmless defaults: no prompt, label, insight or cache; 1M window.

    The texts are the English defaults unless `prompts` is given.
    """
    arguments: dict[str, Any] = {
        "prompts": ENGLISH,
        "system_prompt": None,
        "label": "",
        "insight": None,
        "provider_max_tokens": 1_000_000,
        "cache": None,
        "last_prompt_tokens": None,
    }
    arguments.update(overrides)
    return await assemble_context(
        history=history, user_message=user_message, compress=compress, **arguments
    )


def contents(context: AssembledContext) -> list[str]:
    return [m.content for m in context.messages]


def after_turn(records: list[Record], user: str, reply: str) -> list[Record]:
    """The history after a committed turn: the user and assistant records appended."""
    seq = records[-1].seq if records else 0
    return [*records, Record(seq + 1, "user", user), Record(seq + 2, "assistant", reply)]


class TestRemoveIncompleteToolGroups:
    def test_trailing_orphan_dropped(self) -> None:
        """An assistant whose tool call was never answered is dropped (spec item 51)."""
        records = history(("user", "q"), calls("tc-tail"))
        assert remove_incomplete_tool_groups(records) == records[:1]

    def test_mid_history_orphan_dropped(self) -> None:
        """An unanswered group in the middle goes while clean records stay (spec item 52)."""
        records = history(
            ("user", "a"), calls("tc-orphan"), ("user", "b"), ("assistant", "clean response")
        )
        kept = remove_incomplete_tool_groups(records)
        assert [r.content for r in kept] == ["a", "b", "clean response"]

    def test_complete_group_kept(self) -> None:
        """A group whose calls are all answered is kept whole (spec item 53)."""
        records = history(("user", "a"), calls("tc-ok"), answer("tc-ok"), ("assistant", "done"))
        assert remove_incomplete_tool_groups(records) == records

    def test_partially_answered_group_dropped(self) -> None:
        """A group with one of two calls answered is dropped with its tool message."""
        records = history(("user", "a"), calls("c1", "c2"), answer("c1"), ("user", "b"))
        assert [r.content for r in remove_incomplete_tool_groups(records)] == ["a", "b"]

    def test_stray_tool_dropped(self) -> None:
        """A tool message with no preceding assistant tool call is dropped."""
        records = history(("user", "a"), answer("x"), ("assistant", "r"))
        assert [r.role for r in remove_incomplete_tool_groups(records)] == ["user", "assistant"]

    def test_answers_must_follow_directly(self) -> None:
        """An answer separated from its call by another message does not complete the group."""
        records = history(calls("c1"), ("user", "a"), answer("c1"))
        assert [r.content for r in remove_incomplete_tool_groups(records)] == ["a"]

    def test_works_on_messages(self) -> None:
        """The sanitiser applies to LLM messages as well as records."""
        messages = [
            LLMMessage("user", "a"),
            LLMMessage("assistant", "", (ToolCallSpec("c", "t", {}),)),
        ]
        assert remove_incomplete_tool_groups(messages) == messages[:1]


class TestContextOrder:
    async def test_prompt_identity_insight(self) -> None:
        """With a prompt, label and insight the order is prompt, identity, insight (item 27)."""
        context = await assemble(
            user_message="问题1",
            system_prompt="你是助手",
            label="战略规划",
            insight="洞察",
            prompts=CHINESE,
        )
        assert context.messages == (
            LLMMessage("system", "你是助手"),
            LLMMessage("system", IDENTITY_战略规划),
            LLMMessage("system", "洞察"),
            LLMMessage("user", "问题1"),
        )

    async def test_second_turn_includes_previous_turn(self) -> None:
        """Without insight the second turn is prompt, identity, 问题1, reply, 问题2 (item 28)."""
        records = history(("user", "问题1"), ("assistant", "回答1"))
        context = await assemble(
            records, "问题2", system_prompt="你是助手", label="战略规划", prompts=CHINESE
        )
        assert contents(context) == ["你是助手", IDENTITY_战略规划, "问题1", "回答1", "问题2"]
        assert [m.role for m in context.messages] == [
            "system",
            "system",
            "user",
            "assistant",
            "user",
        ]

    async def test_identity_exact_text(self) -> None:
        """Under zh the identity is exactly the spec's text, right after the prompt (item 39)."""
        context = await assemble(system_prompt="你是助手", label="战略规划", prompts=CHINESE)
        assert context.messages[1] == LLMMessage("system", IDENTITY_战略规划)

    async def test_identity_english_default(self) -> None:
        """By default the identity is the English text naming the label, in the same place."""
        context = await assemble(system_prompt="You help.", label="Research")
        assert context.messages[1] == LLMMessage(
            "system",
            '<session_identity>\nYou are in the "Research" sub-session.\n</session_identity>',
        )

    async def test_identity_first_without_prompt(self) -> None:
        """Without a system prompt the identity comes first (item 40)."""
        context = await assemble(label="调研分支")
        assert context.messages[0] == LLMMessage("system", identity("调研分支"))

    async def test_order_with_all_three(self) -> None:
        """Prompt, identity naming the label, then insight (item 41)."""
        context = await assemble(system_prompt="你是顾问", label="文书", insight="关注截止日期")
        assert context.messages[0].content == "你是顾问"
        assert "文书" in context.messages[1].content
        assert context.messages[2].content == "关注截止日期"

    @pytest.mark.parametrize("prompt", [None, ""])
    async def test_no_identity_for_empty_label(self, prompt: str | None) -> None:
        """An empty label, prompt or insight adds no system message (item 42)."""
        context = await assemble(system_prompt=prompt, label="", insight="")
        assert context.messages == (LLMMessage("user", "hello"),)
        assert not any("<session_identity>" in m.content for m in context.messages)

    async def test_plain_history_is_four_messages(self) -> None:
        """With a 1M window the second turn is identity, msg1, reply, msg2 (item 54)."""
        records = history(("user", "msg1"), ("assistant", "reply"))
        context = await assemble(records, "msg2", label="L")
        assert contents(context) == [identity("L"), "msg1", "reply", "msg2"]
        assert not context.compressed
        assert context.cache is None
        assert context.cache_to_store is None

    def test_memory_is_not_an_input(self) -> None:
        """Memory cannot reach the context: assembly takes no memory at all (DESIGN §5.5)."""
        assert not any("memory" in p for p in inspect.signature(assemble_context).parameters)

    async def test_records_keep_tool_fields(self) -> None:
        """History records keep their tool calls, answered ids and error flags."""
        records = history(("user", "q"), calls("c1"), Record(0, "tool", "boom", (), "c1", True))
        context = await assemble(records, "next")
        assert context.messages[1].tool_calls == (ToolCallSpec("c1", "search", {"q": "c1"}),)
        assert context.messages[2] == LLMMessage("tool", "boom", tool_call_id="c1", is_error=True)

    async def test_estimated_tokens(self) -> None:
        """The result carries the ceil(len/4) estimate of the messages sent."""
        context = await assemble(history(("user", "abcde")), "abcd", system_prompt="ab")
        assert context.estimated_tokens == 1 + 2 + 1


class TestSanitisedHistory:
    async def test_trailing_orphan(self) -> None:
        """An unanswered trailing call is left out and the user message is last (item 51)."""
        records = history(("user", "q"), calls("tc-tail"))
        context = await assemble(records, "follow-up")
        assert not any(m.tool_calls for m in context.messages)
        assert context.messages[-1] == LLMMessage("user", "follow-up")

    async def test_mid_history_orphan(self) -> None:
        """A mid-history orphan group is absent and the clean reply present (item 52)."""
        records = history(("user", "a"), calls("tc-orphan"), ("user", "b"), ("assistant", "clean"))
        context = await assemble(records)
        assert contents(context) == ["a", "b", "clean", "hello"]

    async def test_complete_group(self) -> None:
        """A complete group keeps both its assistant and its tool message (item 53)."""
        records = history(("user", "a"), calls("tc-ok"), answer("tc-ok"), ("assistant", "r"))
        context = await assemble(records)
        assert [m.role for m in context.messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
        assert context.messages[2].tool_call_id == "tc-ok"


class TestToolContinuation:
    async def test_ends_with_tool_messages(self) -> None:
        """Continuing with tool results sends the group and no user message (item 31 shape)."""
        records = history(("user", "搜索 test"), calls("tc_1"))
        context = await assemble(
            records, None, label="L", pending=[Record(0, "tool", '{"hits":3}', tool_call_id="tc_1")]
        )
        assert [m.role for m in context.messages] == ["system", "user", "assistant", "tool"]
        assert context.messages[2].tool_calls[0].id == "tc_1"
        assert context.messages[2].content == ""
        assert context.messages[3] == LLMMessage("tool", '{"hits":3}', tool_call_id="tc_1")

    async def test_with_stored_builtin_result(self) -> None:
        """A group answered partly by stored records and partly by pending ones is complete."""
        records = history(("user", "go"), calls("b1", "c1"), answer("b1", "forked"))
        context = await assemble(records, None, pending=[answer("c1", "client")])
        assert contents(context) == ["go", "", "forked", "client"]

    async def test_pending_never_compressed(self) -> None:
        """Under compression the pending results and their call stay; only stored records go."""
        records = history(*long_records(20), calls("c1"))
        compressor = SpyCompressor()
        context = await assemble(
            records,
            None,
            provider_max_tokens=50,
            compress=compressor,
            pending=[answer("c1", "y" * 400)],
        )
        assert contents(context) == ["SUMMARY", "", "y" * 400]
        assert context.messages[-1].role == "tool"
        assert [r.seq for r in compressor.calls[0]] == list(range(1, 21))
        assert context.cache_to_store == CompressionCache("SUMMARY", 20)


class TestCompression:
    async def test_overflow_compresses(self) -> None:
        """Over 80% of a 50-token window the compressor runs and its summary is sent (item 55)."""
        compressor = SpyCompressor()
        context = await assemble(
            long_records(40), "input", provider_max_tokens=50, compress=compressor
        )
        assert len(compressor.calls) == 1
        system = [m for m in context.messages if m.role == "system"]
        assert system == [LLMMessage("system", "SUMMARY")]
        assert len(context.messages) - len(system) < 40
        assert context.messages[-1] == LLMMessage("user", "input")
        assert context.compressed

    async def test_builtin_compressor(self) -> None:
        """Without its own compressor the provider compresses with the compressor text (item 56)."""
        provider = SpyProvider(max_context_tokens=50)

        async def builtin(records: Sequence[Record]) -> str:
            return await compress_records(provider, records, ENGLISH)

        context = await assemble(
            long_records(20), "input", provider_max_tokens=50, compress=builtin
        )
        await provider.complete(context.messages)
        compression, real = provider.calls
        assert compression[0] == LLMMessage("system", ENGLISH.text(COMPRESSOR))
        summary = context.cache_to_store
        assert summary is not None
        assert LLMMessage("system", summary.summary) in real
        assert len(real) < 21
        assert real[-1] == LLMMessage("user", "input")

    async def test_window_shift_recompresses(self) -> None:
        """Two overflowing turns call the compressor twice: the window moved (item 57)."""
        compressor = SpyCompressor()
        records = long_records(40)
        first = await assemble(records, "m1", provider_max_tokens=50, compress=compressor)
        records = after_turn(records, "m1", "r1")
        second = await assemble(
            records, "m2", provider_max_tokens=50, compress=compressor, cache=first.cache
        )
        assert len(compressor.calls) == 2
        assert first.cache_to_store == CompressionCache("SUMMARY", 40)
        assert second.cache_to_store == CompressionCache("SUMMARY", 39)

    async def test_last_prompt_tokens_estimate(self) -> None:
        """Known prompt tokens + the last two records + the user message are the estimate (58)."""
        records = history(*(("user", "abcd") for _ in range(20)))
        quiet = await assemble(records, "abcd", provider_max_tokens=100)
        assert not quiet.compressed
        compressor = SpyCompressor()
        loud = await assemble(
            records, "abcd", provider_max_tokens=100, last_prompt_tokens=78, compress=compressor
        )
        assert loud.compressed
        assert len(compressor.calls) == 1

    async def test_prior_prompt_tokens_two_sends(self) -> None:
        """With a 100-token window and 70 prior prompt tokens the compressor runs (item 58)."""
        compressor = SpyCompressor()
        records = long_records(20)
        first = await assemble(
            records, "a", provider_max_tokens=100, last_prompt_tokens=70, compress=compressor
        )
        await assemble(
            after_turn(records, "a", "b"),
            "c",
            provider_max_tokens=100,
            last_prompt_tokens=70,
            cache=first.cache,
            compress=compressor,
        )
        assert compressor.calls

    async def test_insight_before_summary(self) -> None:
        """Insight, then summary, then the user message; fewer than 22 messages (item 59)."""
        context = await assemble(
            long_records(20),
            "input",
            insight="INSIGHT",
            provider_max_tokens=50,
            compress=SpyCompressor(),
        )
        found = contents(context)
        assert found.index("INSIGHT") < found.index("SUMMARY") < found.index("input")
        assert len(found) < 22

    async def test_insight_with_builtin_summary(self) -> None:
        """The real call carries the insight and the built-in summary (item 60)."""
        provider = SpyProvider(max_context_tokens=50)

        async def builtin(records: Sequence[Record]) -> str:
            return await compress_records(provider, records, ENGLISH)

        context = await assemble(
            long_records(20), "q", insight="INSIGHT", provider_max_tokens=50, compress=builtin
        )
        await provider.complete(context.messages)
        real = provider.calls[1]
        assert LLMMessage("system", "INSIGHT") in real
        assert context.cache is not None
        assert LLMMessage("system", context.cache.summary) in real

    async def test_memory_absent_summary_present(self) -> None:
        """Overflowing sends carry the compressor summary and never the memory (item 62)."""
        context = await assemble(long_records(20), provider_max_tokens=50, compress=SpyCompressor())
        assert "SUMMARY" in contents(context)
        assert not any("consolidated summary" in c for c in contents(context))

    async def test_cache_keyed_by_covered_seq(self) -> None:
        """The new cache names the seq of the last compressed record, with the summary (item 63)."""
        records = history(*(("user", "x" * 40) for _ in range(100)))
        compressor = SpyCompressor()
        context = await assemble(records, "q", provider_max_tokens=1000, compress=compressor)
        # budget = 800 - 1 (user) - 500 (summary estimate) = 299: the last 29 records fit.
        assert [r.seq for r in compressor.calls[0]] == list(range(1, 72))
        assert context.cache_to_store == CompressionCache("SUMMARY", 71)
        assert context.cache == context.cache_to_store
        assert contents(context) == ["SUMMARY", *(["x" * 40] * 29), "q"]

    async def test_no_overflow_no_cache(self) -> None:
        """Without overflow nothing is compressed and there is no cache to store (item 64)."""
        context = await assemble(long_records(4), cache=CompressionCache("old", 2))
        assert not context.compressed
        assert context.cache_to_store is None
        assert "old" not in contents(context)

    async def test_cache_reused_when_seq_equal(self) -> None:
        """A cache covering exactly the records to compress is reused, uncalled (item 65)."""
        records = history(*(("user", "x" * 40) for _ in range(100)))
        cache = CompressionCache("S" * 2000, 71)
        context = await assemble(records, "q", provider_max_tokens=1000, cache=cache)
        assert context.cache == cache
        assert context.cache_to_store is None
        assert contents(context) == ["S" * 2000, *(["x" * 40] * 29), "q"]

    async def test_same_history_reuses_new_cache(self) -> None:
        """Assembling again over the same history with the cache just made reuses it."""
        records = long_records(40)
        compressor = SpyCompressor("S" * 2000)  # 500 tokens, as reserved: a stable boundary
        first = await assemble(records, "q", provider_max_tokens=50, compress=compressor)
        second = await assemble(records, "q", provider_max_tokens=50, cache=first.cache)
        assert len(compressor.calls) == 1
        assert second.messages == first.messages
        assert second.cache_to_store is None

    async def test_smaller_summary_moves_window(self) -> None:
        """A summary smaller than the 500 reserved widens the next window, so it recomputes."""
        records = long_records(40)
        compressor = SpyCompressor()
        first = await assemble(records, "q", provider_max_tokens=50, compress=compressor)
        second = await assemble(
            records, "q", provider_max_tokens=50, cache=first.cache, compress=compressor
        )
        assert len(compressor.calls) == 2
        assert first.cache_to_store == CompressionCache("SUMMARY", 40)
        assert second.cache_to_store == CompressionCache("SUMMARY", 39)

    async def test_stale_cache_recomputed(self) -> None:
        """A cache covering another seq (e.g. before the window moved) is replaced."""
        records = history(*(("user", "x" * 40) for _ in range(100)))
        compressor = SpyCompressor("S" * 2000)
        context = await assemble(
            records,
            "q",
            provider_max_tokens=1000,
            cache=CompressionCache("S" * 2000, 69),
            compress=compressor,
        )
        assert len(compressor.calls) == 1
        assert context.cache_to_store == CompressionCache("S" * 2000, 71)

    async def test_cached_summary_size_sets_budget(self) -> None:
        """The cached summary's own size, not 500, reserves the summary's budget."""
        records = history(*(("user", "x" * 40) for _ in range(100)))
        compressor = SpyCompressor()
        context = await assemble(
            records,
            "q",
            provider_max_tokens=1000,
            cache=CompressionCache("S" * 400, 1),
            compress=compressor,
        )
        # budget = 800 - 1 - 100 = 699: the last 69 records fit, 31 are compressed.
        assert context.cache_to_store == CompressionCache("SUMMARY", 31)

    async def test_compressor_error_propagates(self) -> None:
        """A failing compressor fails the assembly; there is no cache to store (item 66)."""

        async def broken(records: Sequence[Record]) -> str:
            raise RuntimeError("compressor down")

        with pytest.raises(RuntimeError, match="compressor down"):
            await assemble(long_records(20), provider_max_tokens=50, compress=broken)

    async def test_window_keeps_tool_group_whole(self) -> None:
        """A window starting on a tool message extends back to the assistant that called it."""
        filler: list[tuple[Role, str]] = [("user", "x" * 40)] * 60
        tail: list[tuple[Role, str]] = [("assistant", "y" * 40)] * 28
        records = history(
            *filler, calls("c1", "c2"), answer("c1", "z" * 40), answer("c2", "z" * 40), *tail
        )
        compressor = SpyCompressor()
        context = await assemble(records, "q", provider_max_tokens=1000, compress=compressor)
        assert context.cache_to_store == CompressionCache("SUMMARY", 60)
        roles = [m.role for m in context.messages]
        assert roles[:4] == ["system", "assistant", "tool", "tool"]

    async def test_everything_fits_after_all(self) -> None:
        """Over the threshold but with every record inside the window nothing is compressed."""
        records = history(("user", "x" * 8))
        context = await assemble(records, "q", provider_max_tokens=1000, last_prompt_tokens=900)
        assert not context.compressed
        assert contents(context) == ["x" * 8, "q"]

    async def test_empty_summary_adds_no_message(self) -> None:
        """An empty summary is stored but adds no empty system message."""
        context = await assemble(
            long_records(20), provider_max_tokens=50, compress=SpyCompressor("")
        )
        assert context.cache_to_store == CompressionCache("", 20)
        assert all(m.content for m in context.messages)
