"""Default prompts and the compressor / consolidator calls (STELLO-SPEC §4.9, §6.8)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent_gateway.context import Record
from agent_gateway.llm import (
    DEFAULT_COMPRESS_PROMPT,
    DEFAULT_CONSOLIDATE_PROMPT,
    DEFAULT_FORK_COMPRESS_PROMPT,
    Completion,
    LLMMessage,
    ToolCallSpec,
    ToolSpec,
    build_compress_messages,
    build_consolidate_messages,
    compress_records,
    consolidate_records,
    fork_system_prompt,
    strip_think,
    transcript,
)
from tests.llm.support import SpyProvider, history

RECORDS = history(("user", "msg1"), ("assistant", "reply1"))
LINES = "user: msg1\nassistant: reply1"


class TestDefaultPrompts:
    def test_compress_prompt_mentions_compression(self) -> None:
        """The in-session compress prompt asks for compression (contains '压缩')."""
        assert "压缩" in DEFAULT_COMPRESS_PROMPT

    def test_fork_compress_prompt(self) -> None:
        """The fork-compress prompt frames the summary as the sub-session's opening."""
        assert "子会话开场" in DEFAULT_FORK_COMPRESS_PROMPT
        assert DEFAULT_FORK_COMPRESS_PROMPT != DEFAULT_COMPRESS_PROMPT

    def test_consolidate_prompt(self) -> None:
        """The consolidate prompt asks for a 100 to 150 character summary."""
        assert "100" in DEFAULT_CONSOLIDATE_PROMPT
        assert "150" in DEFAULT_CONSOLIDATE_PROMPT


class TestTranscript:
    def test_lines(self) -> None:
        """Records render as '<role>: <content>' lines joined by newlines."""
        assert transcript(RECORDS) == LINES

    def test_tool_calls_not_rendered(self) -> None:
        """Tool calls are not rendered; tool messages render as 'tool: <content>'."""
        records = [
            Record(1, "assistant", "", (ToolCallSpec("c1", "search", {"q": 1}),)),
            Record(2, "tool", "3 hits", tool_call_id="c1"),
        ]
        assert transcript(records) == "assistant: \ntool: 3 hits"


class TestStripThink:
    @pytest.mark.parametrize(
        ("raw", "clean"),
        [
            pytest.param("<think>hmm</think>  summary ", "summary", id="leading"),
            pytest.param("a<think>x\ny</think>\nb", "ab", id="multiline"),
            pytest.param("<think>1</think>a<think>2</think>b", "ab", id="several"),
            pytest.param("  plain  ", "plain", id="trim"),
        ],
    )
    def test_strip(self, raw: str, clean: str) -> None:
        """<think> blocks and the whitespace after them are removed, then the text is trimmed."""
        assert strip_think(raw) == clean


class TestCompressMessages:
    def test_without_role_context(self) -> None:
        """Without role context the compressor gets [system prompt, user transcript]."""
        assert build_compress_messages(RECORDS) == [
            LLMMessage("system", DEFAULT_COMPRESS_PROMPT),
            LLMMessage("user", "对话记录:\n" + LINES),
        ]

    def test_with_role_context(self) -> None:
        """A role context is a second system message wrapped in <role_context>."""
        messages = build_compress_messages(RECORDS, role_context="你是留学顾问")
        assert len(messages) == 3
        assert messages[1] == LLMMessage("system", "<role_context>\n你是留学顾问\n</role_context>")

    def test_empty_role_context(self) -> None:
        """An empty role context adds nothing."""
        assert len(build_compress_messages(RECORDS, role_context="")) == 2

    def test_fork_prompt(self) -> None:
        """A fork compression uses the fork-compress prompt as the system message."""
        messages = build_compress_messages(RECORDS, prompt=DEFAULT_FORK_COMPRESS_PROMPT)
        assert messages[0] == LLMMessage("system", DEFAULT_FORK_COMPRESS_PROMPT)

    async def test_compress_records_calls_provider(self) -> None:
        """compress_records sends the built messages and returns the cleaned answer."""
        provider = SpyProvider()
        summary = await compress_records(provider, RECORDS)
        assert provider.calls == [build_compress_messages(RECORDS)]
        assert summary == "echo: 对话记录:\n" + LINES


class TestConsolidateMessages:
    def test_without_memory(self) -> None:
        """Without memory the consolidator gets [system prompt, user transcript] (§6.8 item 1)."""
        assert build_consolidate_messages(None, RECORDS) == [
            LLMMessage("system", DEFAULT_CONSOLIDATE_PROMPT),
            LLMMessage("user", "对话记录:\n" + LINES),
        ]

    def test_with_memory(self) -> None:
        """Existing memory comes first under '当前摘要:' (spec item 18 shape)."""
        messages = build_consolidate_messages("existing memory", RECORDS)
        assert messages[-1] == LLMMessage(
            "user", "当前摘要:\nexisting memory\n\n对话记录:\n" + LINES
        )

    def test_empty_memory(self) -> None:
        """An empty memory adds no '当前摘要' part."""
        assert build_consolidate_messages("", RECORDS) == build_consolidate_messages(None, RECORDS)

    def test_with_role_context(self) -> None:
        """A role context gives 3 messages with the exact <role_context> text (§6.8 item 2)."""
        messages = build_consolidate_messages(None, RECORDS, role_context="你是留学顾问")
        assert [m.role for m in messages] == ["system", "system", "user"]
        assert messages[1].content == "<role_context>\n你是留学顾问\n</role_context>"

    def test_empty_role_context(self) -> None:
        """An empty role context gives 2 messages (§6.8 item 3)."""
        assert len(build_consolidate_messages(None, RECORDS, role_context="")) == 2

    async def test_consolidate_records_returns_new_memory(self) -> None:
        """The provider's answer, cleaned, is the new memory (spec item 17 shape)."""
        provider = SpyProvider()
        memory = await consolidate_records(provider, "old", RECORDS)
        assert provider.calls == [build_consolidate_messages("old", RECORDS)]
        assert memory == "echo: 当前摘要:\nold\n\n对话记录:\n" + LINES

    async def test_consolidate_strips_think(self) -> None:
        """<think> blocks in the consolidator's answer never reach memory."""

        class Thinking(SpyProvider):
            async def complete(
                self, messages: Sequence[LLMMessage], *, tools: Sequence[ToolSpec] | None = None
            ) -> Completion:
                completion = await super().complete(messages, tools=tools)
                return type(completion)("<think>plan</think>\n Summary: 4 messages \n")

        assert await consolidate_records(Thinking(), None, RECORDS) == "Summary: 4 messages"


class TestForkSystemPrompt:
    def test_with_prompt(self) -> None:
        """The summary is appended to the prompt inside <parent_context>."""
        assert fork_system_prompt("你是助手", "摘要") == (
            "你是助手\n\n<parent_context>\n摘要\n</parent_context>"
        )

    def test_without_prompt(self) -> None:
        """Without a prompt the result still starts with the two newlines."""
        assert fork_system_prompt(None, "S") == "\n\n<parent_context>\nS\n</parent_context>"
