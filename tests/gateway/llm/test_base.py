"""The provider interface's value types, the factory, and the package's exports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import agent_gateway.llm as llm
from agent_gateway.llm import (
    Completion,
    EchoProvider,
    LLMProvider,
    StreamEvent,
    TextDelta,
    ToolCallSpec,
    Usage,
    build_provider,
    collect,
    estimate_tokens,
)
from stello.settings import StelloSettings


class TestValueTypes:
    def test_usage_adds(self) -> None:
        """Usages of several calls add up field by field."""
        assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)

    def test_completion_defaults(self) -> None:
        """A completion has no tool calls and zero usage unless given."""
        assert Completion("x") == Completion("x", (), Usage(0, 0, 0))

    def test_arguments_json(self) -> None:
        """Tool arguments serialise as compact JSON that keeps non-ASCII text."""
        call = ToolCallSpec("c1", "search", {"q": "世界", "n": 1})
        assert call.arguments_json() == '{"q":"世界","n":1}'

    @pytest.mark.parametrize(
        ("text", "tokens"),
        [
            pytest.param("", 0, id="empty"),
            pytest.param("abcd", 1, id="four"),
            pytest.param("abcde", 2, id="five"),
            pytest.param("你好世界你", 2, id="chinese"),
        ],
    )
    def test_estimate_tokens(self, text: str, tokens: int) -> None:
        """Tokens are estimated as ceil(len/4)."""
        assert estimate_tokens(text) == tokens

    async def test_collect_without_done(self) -> None:
        """A stream that ends without Done is a provider bug and says so."""

        async def broken() -> AsyncIterator[StreamEvent]:
            yield TextDelta("x")

        with pytest.raises(RuntimeError, match="without a Done"):
            await collect(broken())


class TestBuildProvider:
    def test_echo(self) -> None:
        """The echo provider is built with the given context window."""
        provider = build_provider(StelloSettings(llm_provider="echo"), max_context_tokens=77)
        assert isinstance(provider, EchoProvider)
        assert provider.max_context_tokens == 77

    def test_echo_satisfies_protocol(self) -> None:
        """EchoProvider is usable wherever an LLMProvider is expected."""
        provider: LLMProvider = EchoProvider()
        assert provider.max_context_tokens > 0


class TestExports:
    def test_all_names_exist(self) -> None:
        """Every name in agent_gateway.llm.__all__ is importable from it, without duplicates."""
        assert len(set(llm.__all__)) == len(llm.__all__)
        for name in llm.__all__:
            assert hasattr(llm, name), name

    def test_public_names_listed(self) -> None:
        """Every public name the package defines or re-exports is listed in __all__."""
        public = {
            name
            for name, value in vars(llm).items()
            if not name.startswith("_")
            and getattr(value, "__module__", "").startswith("agent_gateway.llm")
        }
        assert public <= set(llm.__all__)
