"""The prompt registry, its presets and the helper calls' messages (STELLO-SPEC §4.9, §6.8).

The structures are the spec's whatever the texts (DESIGN §5.16): each
builder is checked under the English default and the reference's ``zh``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from agent_gateway.history.context import Record
from agent_gateway.llm import (
    KEYS,
    PRESETS,
    Completion,
    LLMMessage,
    PromptError,
    PromptKey,
    Prompts,
    ToolCallSpec,
    ToolSpec,
    compress_records,
    consolidate_records,
    prompt_key,
    strip_think,
    template_problem,
    transcript,
)
from agent_gateway.llm.prompts.texts import (
    COMPRESSOR,
    CONSOLIDATOR,
    FORK_COMPRESSOR,
    MEMORY_HEADER,
    PARENT_CONTEXT,
    SESSION_IDENTITY,
    TRANSCRIPT_HEADER,
    UNKNOWN_PROFILE,
)
from tests.gateway.llm.support import (
    CHINESE,
    ENGLISH,
    ZH_COMPRESS,
    ZH_CONSOLIDATE,
    ZH_FORK_COMPRESS,
    SpyProvider,
    has_cjk,
    history,
)

RECORDS = history(("user", "msg1"), ("assistant", "reply1"))
LINES = "user: msg1\nassistant: reply1"
BOTH = [pytest.param(ENGLISH, id="en"), pytest.param(CHINESE, id="zh")]


class TestRegistry:
    """Every key, its variables and its presets."""

    def test_every_preset_has_exactly_the_keys(self) -> None:
        """Each preset gives a text for every key and for nothing else."""
        names = {key.name for key in KEYS}
        for texts in PRESETS.values():
            assert set(texts) == names

    def test_english_has_no_cjk(self) -> None:
        """No English default holds a CJK character (the issue's 24% were all of this kind)."""
        assert [name for name, text in PRESETS["en"].items() if has_cjk(text)] == []

    def test_zh_is_the_reference(self) -> None:
        """The zh preset holds the reference's texts, exactly."""
        texts = PRESETS["zh"]
        assert texts[COMPRESSOR.name] == ZH_COMPRESS
        assert texts[FORK_COMPRESSOR.name] == ZH_FORK_COMPRESS
        assert texts[CONSOLIDATOR.name] == ZH_CONSOLIDATE
        assert (
            CHINESE.identity("L")
            == "<session_identity>\n你当前在「L」子会话中。\n</session_identity>"
        )
        assert (texts[TRANSCRIPT_HEADER.name], texts[MEMORY_HEADER.name]) == (
            "对话记录:",
            "当前摘要:",
        )
        assert CHINESE.text(UNKNOWN_PROFILE, profile="p") == 'Profile "p" 未注册'

    def test_presets_differ_in_language_only(self) -> None:
        """The English texts are not the Chinese ones, except the tag-only parent_context."""
        same = [key.name for key in KEYS if ENGLISH.texts[key.name] == CHINESE.texts[key.name]]
        assert same == [PARENT_CONTEXT.name]

    def test_unknown_key(self) -> None:
        """An unknown key is refused with the list of known keys."""
        with pytest.raises(PromptError, match=r"unknown prompt key 'compresor'.*compressor"):
            prompt_key("compresor")

    @pytest.mark.parametrize(
        ("key", "text", "problem"),
        [
            pytest.param(CONSOLIDATOR, "Sum up {label}.", r"\{label\}.*no variables", id="var"),
            pytest.param(SESSION_IDENTITY, "In {lable}.", r"\{lable\}.*\{label\}", id="typo"),
            pytest.param(PARENT_CONTEXT, "<p/>", r"must contain \{summary\}", id="required"),
        ],
    )
    def test_template_problems(self, key: PromptKey, text: str, problem: str) -> None:
        """A variable the key lacks, or a required one left out, is named."""
        found = template_problem(key, text)
        assert found is not None and re.search(problem, found)

    def test_literal_braces_are_fine(self) -> None:
        """Doubled braces and non-identifier braces are text, not variables."""
        assert template_problem(COMPRESSOR, 'Answer {{"a": 1}} or { "b": 2 }.') is None
        assert Prompts.preset("en", {COMPRESSOR.name: "{{x}}"}).text(COMPRESSOR) == "{x}"


class TestPromptSet:
    """`Prompts`: presets, overrides and their checks."""

    def test_default_is_english(self) -> None:
        """With no argument the set is the English preset."""
        assert Prompts() == Prompts.preset("en") == ENGLISH

    def test_override_replaces_one_key(self) -> None:
        """An override replaces exactly its key; every other text is the preset's."""
        changed = Prompts.preset("zh", {CONSOLIDATOR.name: "Sum up."})
        assert changed.text(CONSOLIDATOR) == "Sum up."
        others = [key.name for key in KEYS if key is not CONSOLIDATOR]
        assert all(changed.texts[name] == CHINESE.texts[name] for name in others)

    def test_override_checked(self) -> None:
        """An override with a variable its key lacks is refused."""
        with pytest.raises(PromptError, match=r"\{label\}"):
            Prompts.preset("en", {COMPRESSOR.name: "{label}"})

    def test_unknown_preset(self) -> None:
        """An unknown preset name is refused naming the presets."""
        with pytest.raises(PromptError, match="en, zh"):
            Prompts.preset("fr")  # type: ignore[arg-type]  # deliberately not a preset


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
            pytest.param("summary <think>cut off by max_", "summary", id="unclosed-after"),
            pytest.param("<think>a</think>b<think>cut", "b", id="closed-then-unclosed"),
            pytest.param("opened by the prompt\n</think>\n\nsummary", "summary", id="no-open"),
            pytest.param("x</think>a<think>y</think>b", "ab", id="no-open-then-closed"),
            pytest.param("<think>x</think>a </think>b", "a </think>b", id="closed-then-stray"),
        ],
    )
    def test_strip(self, raw: str, clean: str) -> None:
        """<think> blocks and the whitespace after them are removed, then the text is trimmed."""
        assert strip_think(raw) == clean

    @pytest.mark.parametrize(
        "raw",
        [
            pytest.param("<think>all reasoning</think>\n", id="closed"),
            pytest.param("<think>reasoning cut off by max_tok", id="unclosed"),
            pytest.param("\n<think>a</think> <think>b", id="closed-then-unclosed"),
            pytest.param("reasoning the prompt opened</think>\n", id="no-open"),
        ],
    )
    def test_reasoning_alone_is_empty(self, raw: str) -> None:
        """An answer of reasoning alone is empty, an unclosed <think> (an answer cut inside its
        reasoning) taken to the end: none of it can become a summary or memory."""
        assert strip_think(raw) == ""


class TestCompressMessages:
    def test_zh_exact(self) -> None:
        """Under zh the compressor gets the spec's [system prompt, user "对话记录:\\n" + lines]."""
        assert CHINESE.compress_messages(RECORDS) == [
            LLMMessage("system", ZH_COMPRESS),
            LLMMessage("user", "对话记录:\n" + LINES),
        ]

    def test_english_default(self) -> None:
        """By default the same two messages carry the English prompt and header."""
        assert ENGLISH.compress_messages(RECORDS) == [
            LLMMessage("system", ENGLISH.text(COMPRESSOR)),
            LLMMessage("user", "Conversation:\n" + LINES),
        ]

    @pytest.mark.parametrize("prompts", BOTH)
    def test_with_role_context(self, prompts: Prompts) -> None:
        """A role context is a second system message wrapped in <role_context> (§6.8 item 4)."""
        messages = prompts.compress_messages(RECORDS, role_context="你是留学顾问")
        assert [m.role for m in messages] == ["system", "system", "user"]
        assert messages[1] == LLMMessage("system", "<role_context>\n你是留学顾问\n</role_context>")

    @pytest.mark.parametrize("prompts", BOTH)
    def test_empty_role_context(self, prompts: Prompts) -> None:
        """An empty role context adds nothing."""
        assert len(prompts.compress_messages(RECORDS, role_context="")) == 2

    def test_given_prompt(self) -> None:
        """A given prompt (a fork's, a session's override) replaces only the system message."""
        messages = CHINESE.compress_messages(RECORDS, prompt=ZH_FORK_COMPRESS)
        assert messages == [
            LLMMessage("system", ZH_FORK_COMPRESS),
            LLMMessage("user", "对话记录:\n" + LINES),
        ]

    async def test_compress_records_calls_provider(self) -> None:
        """compress_records sends the built messages and returns the cleaned answer."""
        provider = SpyProvider()
        summary = await compress_records(provider, RECORDS, ENGLISH)
        assert provider.calls == [ENGLISH.compress_messages(RECORDS)]
        assert summary == "echo: Conversation:\n" + LINES


class TestConsolidateMessages:
    def test_zh_exact(self) -> None:
        """Under zh, without memory: [system prompt, user "对话记录:\\n" + lines] (§6.8 item 1)."""
        assert CHINESE.consolidate_messages(None, RECORDS) == [
            LLMMessage("system", ZH_CONSOLIDATE),
            LLMMessage("user", "对话记录:\n" + LINES),
        ]

    def test_zh_with_memory(self) -> None:
        """Under zh an existing memory comes first under '当前摘要:' (spec §4.9 item 5)."""
        messages = CHINESE.consolidate_messages("existing memory", RECORDS)
        assert messages[-1] == LLMMessage(
            "user", "当前摘要:\nexisting memory\n\n对话记录:\n" + LINES
        )

    def test_english_with_memory(self) -> None:
        """By default the same structure carries the English headers."""
        messages = ENGLISH.consolidate_messages("existing memory", RECORDS)
        assert messages == [
            LLMMessage("system", ENGLISH.text(CONSOLIDATOR)),
            LLMMessage("user", "Current summary:\nexisting memory\n\nConversation:\n" + LINES),
        ]

    @pytest.mark.parametrize("prompts", BOTH)
    def test_empty_memory(self, prompts: Prompts) -> None:
        """An empty memory adds no memory part."""
        assert prompts.consolidate_messages("", RECORDS) == prompts.consolidate_messages(
            None, RECORDS
        )

    @pytest.mark.parametrize("prompts", BOTH)
    def test_with_role_context(self, prompts: Prompts) -> None:
        """A role context gives 3 messages with the exact <role_context> text (§6.8 item 2)."""
        messages = prompts.consolidate_messages(None, RECORDS, role_context="你是留学顾问")
        assert [m.role for m in messages] == ["system", "system", "user"]
        assert messages[1].content == "<role_context>\n你是留学顾问\n</role_context>"

    @pytest.mark.parametrize("prompts", BOTH)
    def test_empty_role_context(self, prompts: Prompts) -> None:
        """An empty role context gives 2 messages (§6.8 item 3)."""
        assert len(prompts.consolidate_messages(None, RECORDS, role_context="")) == 2

    async def test_consolidate_records_returns_new_memory(self) -> None:
        """The provider's answer, cleaned, is the new memory (spec item 17 shape)."""
        provider = SpyProvider()
        memory = await consolidate_records(provider, "old", RECORDS, CHINESE)
        assert provider.calls == [CHINESE.consolidate_messages("old", RECORDS)]
        assert memory == "echo: 当前摘要:\nold\n\n对话记录:\n" + LINES

    async def test_consolidate_strips_think(self) -> None:
        """<think> blocks in the consolidator's answer never reach memory."""

        class Thinking(SpyProvider):
            async def complete(
                self,
                messages: Sequence[LLMMessage],
                *,
                tools: Sequence[ToolSpec] | None = None,
                max_tokens: int | None = None,
            ) -> Completion:
                completion = await super().complete(messages, tools=tools, max_tokens=max_tokens)
                return type(completion)("<think>plan</think>\n Summary: 4 messages \n")

        memory = await consolidate_records(Thinking(), None, RECORDS, ENGLISH)
        assert memory == "Summary: 4 messages"


class TestParentContext:
    @pytest.mark.parametrize("prompts", BOTH)
    def test_with_prompt(self, prompts: Prompts) -> None:
        """The summary is appended to the prompt inside <parent_context> (spec §4.9 item 6)."""
        assert prompts.with_parent_context("你是助手", "摘要") == (
            "你是助手\n\n<parent_context>\n摘要\n</parent_context>"
        )

    @pytest.mark.parametrize("prompts", BOTH)
    def test_without_prompt(self, prompts: Prompts) -> None:
        """Without a prompt (or a blank one) the block alone: no blank lines first."""
        assert prompts.with_parent_context(None, "S") == "<parent_context>\nS\n</parent_context>"
        assert prompts.with_parent_context(" \n", "S") == "<parent_context>\nS\n</parent_context>"

    def test_override(self) -> None:
        """A configured block replaces the tags; the blank line before it stays."""
        prompts = Prompts.preset("en", {PARENT_CONTEXT.name: "Background:\n{summary}"})
        assert prompts.with_parent_context("P", "S") == "P\n\nBackground:\nS"
