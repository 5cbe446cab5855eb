"""The anthropic provider's reading of a stream's events as Anthropic-compatible servers send
them (`anthropic_answers.read_events`), against the loopback fake server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from agent_gateway.llm import Completion, LLMMessage, ToolCallSpec, Usage, collect
from agent_gateway.llm.network import anthropic_answers
from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from stello.errors import Unavailable
from tests.gateway.llm.network.support import logged
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import FakeAnswer, FakeToolCall, Reply

HI = [LLMMessage("user", "hi")]


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(name="provider")
async def _provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    async with AnthropicProvider(
        model="m", api_key="k", base_url=fake.base_url, max_retries=0
    ) as provider:
        yield provider


class TestEventsWithoutName:
    async def test_the_type_in_the_data_names_the_event(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """A stream with no ``event:`` lines, each event's type in its data only, is read as
        the same stream with them; it was read as no event at all, and the turn failed as
        a stream closed mid-answer."""
        call = FakeToolCall("search", {"q": "tea"}, id="toolu_1")
        fake.reply_unnamed(FakeAnswer("hello there", (call,), prompt_tokens=7))
        completion = await collect(provider.stream(HI))
        assert completion == Completion(
            "hello there",
            (ToolCallSpec("toolu_1", "search", {"q": "tea"}),),
            Usage(7, 5, 12),
            "tool_calls",
        )

    async def test_each_events_data_is_parsed_once(
        self, fake: FakeAnthropic, provider: AnthropicProvider, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An event with no ``event:`` line has its data parsed once, as a named event's is
        (it was parsed twice: once to find its type, once to build it)."""
        parsed: list[str] = []

        def loads(data: str) -> object:
            parsed.append(data)
            return json.loads(data)

        monkeypatch.setattr(anthropic_answers, "json", SimpleNamespace(loads=loads))
        fake.reply_unnamed(FakeAnswer("hello there", prompt_tokens=7))
        assert (await collect(provider.stream(HI))).content == "hello there"
        assert parsed
        assert len(parsed) == len(set(parsed)), parsed

    async def test_an_unnamed_error_event_is_the_error(
        self, fake: FakeAnthropic, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An error event with no ``event:`` line is the error its type says (overloaded:
        UNAVAILABLE), its message logged."""
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy now"}}
        fake.push(Reply.sse([(None, error)]))
        with pytest.raises(Unavailable) as caught:
            await collect(provider.stream(HI))
        assert "busy now" in logged(caplog, caught.value)

    async def test_unnamed_data_that_is_not_an_event_is_skipped(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """Unnamed data that is not a JSON object with a type is skipped, as before."""
        answer = fake.render
        fake.push(
            lambda request: Reply(
                headers=(("content-type", "text/event-stream"),),
                chunks=(b"data: [1, 2]\n\n", b'data: {"no": "type"}\n\n', b"data: hi\n\n")
                + (answer(FakeAnswer("ok"), request).chunks or ()),
            )
        )
        assert (await collect(provider.stream(HI))).content == "ok"
