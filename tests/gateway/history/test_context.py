"""Context assembly: order, sanitisation, tool groups, what a compression may evict (spec §4.5)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import pytest

from agent_gateway.history.context import (
    Record,
    Summary,
    TurnContext,
    context_prefix,
    tool_groups,
)
from agent_gateway.llm import LLMMessage, Prompts, ToolCallSpec
from stello.rules.tool_groups import remove_incomplete_tool_groups
from tests.gateway.llm.support import (
    CHINESE,
    ENGLISH,
    answer,
    calls,
    history,
    identity,
    long_records,
)

IDENTITY_战略规划 = "<session_identity>\n你当前在「战略规划」子会话中。\n</session_identity>"
"""The spec's identity text (§4.5.1 row 3), as the zh preset gives it."""


def build(
    records: Sequence[Record] = (),
    user: str | None = "hello",
    *,
    system_prompt: str | None = None,
    label: str = "",
    insight: str | None = None,
    prompts: Prompts = ENGLISH,
    summary: Summary | None = None,
    pending: Sequence[Record] = (),
) -> TurnContext:
    """A turn's context with harmless defaults: no prompt, label, insight or summary."""
    prefix = context_prefix(system_prompt, label, insight, prompts)
    return TurnContext(prefix, summary, records, pending, user, ())


def contents(context: TurnContext) -> list[str]:
    return [m.content for m in context.messages()]


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

    def test_a_group_keeps_one_answer_per_call(self) -> None:
        """A complete group keeps the first answer of each of its calls and no other tool
        record: an answer to a call it did not make, or a second answer to one, went to the
        model, whose API refuses a tool message that answers no call (the session's every
        later turn failed)."""
        records = history(
            ("user", "a"),
            calls("c1"),
            answer("c1", "first"),
            answer("c9", "stray"),
            answer("c1", "again"),
            ("assistant", "done"),
        )
        kept = remove_incomplete_tool_groups(records)
        assert [r.content for r in kept] == ["a", "", "first", "done"]

    def test_works_on_messages(self) -> None:
        """The sanitiser applies to LLM messages as well as records."""
        messages = [
            LLMMessage("user", "a"),
            LLMMessage("assistant", "", (ToolCallSpec("c", "t", {}),)),
        ]
        assert remove_incomplete_tool_groups(messages) == messages[:1]


class TestContextOrder:
    def test_prompt_identity_insight(self) -> None:
        """With a prompt, label and insight the order is prompt, identity, insight (item 27)."""
        context = build(
            user="问题1",
            system_prompt="你是助手",
            label="战略规划",
            insight="洞察",
            prompts=CHINESE,
        )
        assert context.messages() == [
            LLMMessage("system", "你是助手"),
            LLMMessage("system", IDENTITY_战略规划),
            LLMMessage("system", "洞察"),
            LLMMessage("user", "问题1"),
        ]

    def test_second_turn_includes_previous_turn(self) -> None:
        """Without insight the second turn is prompt, identity, 问题1, reply, 问题2 (item 28)."""
        records = history(("user", "问题1"), ("assistant", "回答1"))
        context = build(
            records, "问题2", system_prompt="你是助手", label="战略规划", prompts=CHINESE
        )
        assert contents(context) == ["你是助手", IDENTITY_战略规划, "问题1", "回答1", "问题2"]
        assert [m.role for m in context.messages()] == [
            "system",
            "system",
            "user",
            "assistant",
            "user",
        ]

    def test_identity_exact_text(self) -> None:
        """Under zh the identity is exactly the spec's text, right after the prompt (item 39)."""
        context = build(system_prompt="你是助手", label="战略规划", prompts=CHINESE)
        assert context.messages()[1] == LLMMessage("system", IDENTITY_战略规划)

    def test_identity_english_default(self) -> None:
        """By default the identity is the English text naming the label, in the same place."""
        context = build(system_prompt="You help.", label="Research")
        assert context.messages()[1] == LLMMessage(
            "system",
            '<session_identity>\nYou are in the "Research" sub-session.\n</session_identity>',
        )

    def test_identity_first_without_prompt(self) -> None:
        """Without a system prompt the identity comes first (item 40)."""
        context = build(label="调研分支")
        assert context.messages()[0] == LLMMessage("system", identity("调研分支"))

    def test_order_with_all_three(self) -> None:
        """Prompt, identity naming the label, then insight (item 41)."""
        context = build(system_prompt="你是顾问", label="文书", insight="关注截止日期")
        assert context.messages()[0].content == "你是顾问"
        assert "文书" in context.messages()[1].content
        assert context.messages()[2].content == "关注截止日期"

    @pytest.mark.parametrize("prompt", [None, ""])
    def test_no_identity_for_empty_label(self, prompt: str | None) -> None:
        """An empty label, prompt or insight adds no system message (item 42)."""
        context = build(system_prompt=prompt, label="", insight="")
        assert context.messages() == [LLMMessage("user", "hello")]
        assert not any("<session_identity>" in m.content for m in context.messages())

    def test_plain_history_is_four_messages(self) -> None:
        """With a 1M window the second turn is identity, msg1, reply, msg2 (item 54)."""
        records = history(("user", "msg1"), ("assistant", "reply"))
        context = build(records, "msg2", label="L")
        assert contents(context) == [identity("L"), "msg1", "reply", "msg2"]

    def test_memory_is_not_an_input(self) -> None:
        """Memory cannot reach the context: a turn's context takes no memory at all (§5.5)."""
        assert not any("memory" in p for p in inspect.signature(TurnContext).parameters)
        assert not any("memory" in p for p in inspect.signature(context_prefix).parameters)

    def test_records_keep_tool_fields(self) -> None:
        """History records keep their tool calls, answered ids and error flags."""
        records = history(("user", "q"), calls("c1"), Record(0, "tool", "boom", (), "c1", True))
        context = build(records, "next")
        assert context.messages()[1].tool_calls == (ToolCallSpec("c1", "search", {"q": "c1"}),)
        assert context.messages()[2] == LLMMessage("tool", "boom", tool_call_id="c1", is_error=True)


class TestSanitisedHistory:
    def test_trailing_orphan(self) -> None:
        """An unanswered trailing call is left out and the user message is last (item 51)."""
        records = history(("user", "q"), calls("tc-tail"))
        context = build(records, "follow-up")
        assert not any(m.tool_calls for m in context.messages())
        assert context.messages()[-1] == LLMMessage("user", "follow-up")

    def test_mid_history_orphan(self) -> None:
        """A mid-history orphan group is absent and the clean reply present (item 52)."""
        records = history(("user", "a"), calls("tc-orphan"), ("user", "b"), ("assistant", "clean"))
        context = build(records)
        assert contents(context) == ["a", "b", "clean", "hello"]

    def test_complete_group(self) -> None:
        """A complete group keeps both its assistant and its tool message (item 53)."""
        records = history(("user", "a"), calls("tc-ok"), answer("tc-ok"), ("assistant", "r"))
        context = build(records)
        assert [m.role for m in context.messages()] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
        assert context.messages()[2].tool_call_id == "tc-ok"


class TestToolContinuation:
    def test_ends_with_tool_messages(self) -> None:
        """Continuing with tool results sends the group and no user message (item 31 shape)."""
        records = history(("user", "搜索 test"), calls("tc_1"))
        context = build(
            records, None, label="L", pending=[Record(0, "tool", '{"hits":3}', tool_call_id="tc_1")]
        )
        assert [m.role for m in context.messages()] == ["system", "user", "assistant", "tool"]
        assert context.messages()[2].tool_calls[0].id == "tc_1"
        assert context.messages()[2].content == ""
        assert context.messages()[3] == LLMMessage("tool", '{"hits":3}', tool_call_id="tc_1")

    def test_with_stored_builtin_result(self) -> None:
        """A group answered partly by stored records and partly by pending ones is complete."""
        records = history(("user", "go"), calls("b1", "c1"), answer("b1", "forked"))
        context = build(records, None, pending=[answer("c1", "client")])
        assert contents(context) == ["go", "", "forked", "client"]


class TestSummary:
    def test_summary_after_insight(self) -> None:
        """A summary is a system message after the insight, before the window (DESIGN §4.3)."""
        records = history(("user", "late"), ("assistant", "reply"))
        context = build(records, "q", insight="hint", summary=Summary("so far", 0))
        assert contents(context) == ["hint", "so far", "late", "reply", "q"]

    def test_empty_summary_adds_no_message(self) -> None:
        """An empty summary text adds no message."""
        context = build(history(("user", "a")), "q", summary=Summary("", 0))
        assert contents(context) == ["a", "q"]


class TestEviction:
    def test_tool_groups(self) -> None:
        """A call and its results are one group; every other record is a group of its own."""
        records = history(
            ("user", "a"), calls("c1", "c2"), answer("c1"), answer("c2"), ("user", "b")
        )
        assert [[r.seq for r in g] for g in tool_groups(records)] == [[1], [2, 3, 4], [5]]

    def test_trailing_tool_group_is_never_evictable(self) -> None:
        """The trailing tool group (the one SubmitToolResults continues) stays."""
        records = history(("user", "a"), calls("c1"), answer("c1"), ("user", "b"), calls("c2"))
        context = build(records, None, pending=[answer("c2", "late")])
        assert [[r.seq for r in g] for g in context.evictable()] == [[1], [2, 3], [4]]

    def test_evict_takes_the_oldest_groups(self) -> None:
        """Evicting two groups takes their records out of the window, oldest first."""
        records = history(("user", "a"), calls("c1"), answer("c1"), ("user", "b"))
        context = build(records)
        assert [r.seq for r in context.evict(2)] == [1, 2, 3]
        assert contents(context) == ["b", "hello"]

    def test_loop_messages_come_last(self) -> None:
        """What the tool loop adds follows the user message."""
        context = build(long_records(2), "q")
        context.loop.append(LLMMessage("assistant", "", (ToolCallSpec("c", "t", {}),)))
        assert context.messages()[-2] == LLMMessage("user", "q")
        assert context.messages()[-1].tool_calls
