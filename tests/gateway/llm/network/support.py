"""Helpers shared by the provider tests: a fake server with the real provider talking to it
(`remote`), the error answers the SDKs retry (`refusal`, `busy`), the two ways to call a
provider, a turn's context, and a server that closes every connection unanswered
(`closer`)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from agent_gateway.history.context import Record, context_prefix
from agent_gateway.llm import Completion, LLMMessage, LLMProvider, ToolCallSpec, ToolSpec, collect
from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.errors import StelloError
from tests.gateway.llm.support import ENGLISH
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import Reply
from tests.support.fake_openai import FakeOpenAI

Mode = Literal["complete", "stream"]

MODES = [pytest.param("complete", id="complete"), pytest.param("stream", id="stream")]
"""Parametrise a test over a non-streaming and a streaming call."""

NETWORK = ["openai", "anthropic"]
"""The network providers: parametrise a fixture over them (`remote`, `network_provider`)."""
HI = [LLMMessage("user", "hi")]

MODEL = "test-model"
KEY = "sk-test-key-0123456789"

SEARCH = ToolSpec(
    "search",
    "Search the notes.",
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


@dataclass(frozen=True, slots=True)
class Remote:
    """A fake server and the real provider talking to it."""

    fake: FakeOpenAI | FakeAnthropic
    provider: OpenAIProvider | AnthropicProvider


def fake_server(name: str) -> FakeOpenAI | FakeAnthropic:
    """A fake server speaking the protocol of the network provider `name` (not started)."""
    return FakeOpenAI() if name == "openai" else FakeAnthropic()


def network_provider(
    name: str, base_url: str, **settings: Any
) -> OpenAIProvider | AnthropicProvider:
    """The network provider `name` at `base_url`, with `settings` (model "m" and key "k"
    unless they say otherwise)."""
    settings = {"model": "m", "api_key": "k", **settings}
    if name == "openai":
        return OpenAIProvider(base_url=base_url, **settings)
    return AnthropicProvider(base_url=base_url, **settings)


@asynccontextmanager
async def remote(name: str, **settings: Any) -> AsyncIterator[Remote]:
    """A started fake server of `name`'s protocol and the provider talking to it, with
    `settings` (`network_provider`), both closed on exit."""
    async with fake_server(name) as fake:
        async with network_provider(name, fake.base_url, **settings) as provider:
            yield Remote(fake, provider)


@dataclass(slots=True)
class Closer:
    """A loopback server that accepts each connection and closes it at once, unanswered."""

    port: int = 0
    connections: int = 0
    server: asyncio.Server | None = field(default=None, repr=False)

    def base_url(self, name: str) -> str:
        """The base URL to give the network provider `name` (OpenAI's under /v1)."""
        return f"http://127.0.0.1:{self.port}" + ("/v1" if name == "openai" else "")

    async def _close(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()


@asynccontextmanager
async def closer() -> AsyncIterator[Closer]:
    """A started `Closer`, stopped on exit."""
    found = Closer()
    server = await asyncio.start_server(found._close, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    try:
        yield found
    finally:
        server.close()
        await server.wait_closed()


def refusal(status: int, retry_after: str) -> Reply:
    """An HTTP error answer asking to wait `retry_after` (the header's text)."""
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    return Reply.json(body, status=status, headers=(("retry-after", retry_after),))


def busy(status: int) -> Reply:
    """An HTTP error answer the SDKs retry, asking no wait (their backoff is slept)."""
    body = {"error": {"message": "busy", "type": "overloaded_error"}}
    return Reply.json(body, status=status)


def logged(caplog: pytest.LogCaptureFixture, error: BaseException) -> str:
    """The one log line under `error`'s error id: the details its client is not told."""
    assert isinstance(error, StelloError)
    found = re.search(r"error id ([0-9a-f]{16})", error.message)
    assert found is not None, error.message
    lines = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


async def call(
    provider: LLMProvider,
    mode: Mode,
    messages: Sequence[LLMMessage],
    tools: Sequence[ToolSpec] | None = None,
) -> Completion:
    """The provider's completion, through `complete` or through `stream`."""
    if mode == "complete":
        return await provider.complete(messages, tools=tools)
    return await collect(provider.stream(messages, tools=tools))


def turn_context() -> list[LLMMessage]:
    """A turn of spec §4.5.1: system prompt, identity, insight, history, the user message.

    The history has two rounds, one of them a tool round with a failed call.
    Memory has no way in: context assembly takes none (DESIGN §5.5).
    """
    history = [
        Record(1, "user", "What is in my notes?"),
        Record(2, "assistant", "", (ToolCallSpec("call_a", "search", {"q": "notes"}),)),
        Record(3, "tool", "index unavailable", tool_call_id="call_a", is_error=True),
        Record(4, "assistant", "I could not search them."),
    ]
    return [
        *context_prefix("You are Stello.", "Research", "The user prefers short answers.", ENGLISH),
        *(record.to_message() for record in history),
        LLMMessage("user", "Try again."),
    ]
