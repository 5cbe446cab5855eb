"""Why an answer ended, carried to the turn (`Completion.finish_reason`), and the bound of an
answer (`answers.AnswerBound`), streamed or not, for both network providers and echo."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agent_gateway.llm import Completion, EchoProvider, LLMMessage, collect
from agent_gateway.llm.base import FinishReason
from agent_gateway.llm.network.answers import answer_limit
from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.errors import ResourceExhausted
from stello.reasons import LLM_ANSWER_TOO_LARGE
from tests.gateway.llm.network.support import NETWORK, remote
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import FakeAnswer, FakeToolCall, Reply
from tests.support.fake_openai import FakeOpenAI

HI = [LLMMessage("user", "hi")]
RECORD_BYTES = 1024
"""A small record limit: the bound is then `answer_limit(RECORD_BYTES)`."""
PAST = 24 << 20
"""A body far past the bound and past what loopback's socket buffers hold, so a reading
stopped early shows as a reply the fake could not write to its end."""


STOPS: dict[str, dict[str, FinishReason]] = {
    "openai": {"stop": "stop", "length": "length", "content_filter": "content_filter"},
    "anthropic": {"end_turn": "stop", "max_tokens": "length", "refusal": "content_filter"},
}
"""Each network provider's own stop reasons, and what they mean."""


@dataclass(frozen=True, slots=True)
class Remote:
    """A fake server, a provider talking to it, and the provider's own stop reasons."""

    fake: FakeOpenAI | FakeAnthropic
    provider: OpenAIProvider | AnthropicProvider
    stops: dict[str, FinishReason]


@pytest.fixture(name="remote", params=NETWORK)
async def _remote(request: pytest.FixtureRequest) -> AsyncIterator[Remote]:
    async with remote(request.param, max_retries=0, record_bytes=RECORD_BYTES) as made:
        yield Remote(made.fake, made.provider, STOPS[request.param])


async def both(remote: Remote, answer: FakeAnswer) -> list[Completion]:
    """The completion of `answer` answered whole, then streamed."""
    remote.fake.answer(answer)
    whole = await remote.provider.complete(HI)
    remote.fake.answer(answer)
    return [whole, await collect(remote.provider.stream(HI))]


class TestFinishReason:
    async def test_each_stop_is_carried(self, remote: Remote) -> None:
        """The provider's stop reasons map to one `FinishReason`, streamed or not; a content
        filter's (OpenAI's ``content_filter``, Anthropic's ``refusal``) is told apart."""
        for said, meant in remote.stops.items():
            text = "" if meant == "content_filter" else "some text"
            for completion in await both(remote, FakeAnswer(text, stop=said)):
                assert completion.finish_reason == meant, said

    async def test_a_tool_call(self, remote: Remote) -> None:
        for completion in await both(remote, FakeAnswer(tool_calls=(FakeToolCall("f"),))):
            assert completion.finish_reason == "tool_calls"

    async def test_an_unknown_stop_is_none(self, remote: Remote) -> None:
        for completion in await both(remote, FakeAnswer("text", stop="something_new")):
            assert completion.finish_reason is None

    async def test_echo(self) -> None:
        echo = EchoProvider()
        assert (await echo.complete(HI)).finish_reason == "stop"
        called = await echo.complete([LLMMessage("user", '/tool f {"a": 1}')])
        assert (called.finish_reason, len(called.tool_calls)) == ("tool_calls", 1)


class TestStreamBound:
    @pytest.mark.parametrize("in_calls", [False, True], ids=["text", "tool arguments"])
    async def test_past_the_bound_is_answer_too_large(self, remote: Remote, in_calls: bool) -> None:
        """A streamed answer whose text, or tool-call arguments, pass `answer_limit` of the
        record limit ends RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE."""
        big = "x" * (answer_limit(RECORD_BYTES) + 1)
        if in_calls:
            remote.fake.answer(FakeAnswer(tool_calls=(FakeToolCall("f", {"a": big}),)))
        else:
            remote.fake.answer(FakeAnswer(big, chunks=64))
        with pytest.raises(ResourceExhausted) as caught:
            await collect(remote.provider.stream(HI))
        assert caught.value.reason == LLM_ANSWER_TOO_LARGE
        assert caught.value.metadata["record_bytes"] == str(RECORD_BYTES)
        assert int(caught.value.metadata["answer_bytes"]) > answer_limit(RECORD_BYTES)

    async def test_inputs_at_block_start_count(self) -> None:
        """Anthropic: tool calls whose whole input comes in their content_block_start, each
        under the bound but together past it, end RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE;
        they were not counted, and an answer of any number of them was read. Under the
        bound, they are read as sent."""
        third = "x" * (answer_limit(RECORD_BYTES) // 3)
        calls = tuple(FakeToolCall("f", {"a": third}, id=f"toolu_{i}") for i in range(4))
        async with FakeAnthropic() as fake:
            async with AnthropicProvider(
                model="m", api_key="k", base_url=fake.base_url, record_bytes=RECORD_BYTES
            ) as provider:
                fake.reply_with_input_at_start(calls[:2])
                completion = await collect(provider.stream(HI))
                assert [call.arguments for call in completion.tool_calls] == [{"a": third}] * 2
                fake.reply_with_input_at_start(calls)
                with pytest.raises(ResourceExhausted) as caught:
                    await collect(provider.stream(HI))
        assert caught.value.reason == LLM_ANSWER_TOO_LARGE
        assert int(caught.value.metadata["answer_bytes"]) > answer_limit(RECORD_BYTES)

    async def test_up_to_the_bound_is_read(self, remote: Remote) -> None:
        """An answer just under the bound is read whole (the turn measures it against the
        record limit itself)."""
        text = "x" * (answer_limit(RECORD_BYTES) - 10)
        remote.fake.answer(FakeAnswer(text, chunks=64))
        assert (await collect(remote.provider.stream(HI))).content == text


def endless_body() -> Reply:
    """A JSON body sent in pieces (chunked) whose text does not end before `PAST` bytes."""
    piece = b"x" * (64 * 1024)
    return Reply(
        headers=(("content-type", "application/json"),),
        chunks=(b'{"content": [{"type": "text", "text": "', *((piece,) * (PAST // len(piece)))),
    )


class TestCallBound:
    @pytest.mark.parametrize("shape", ["long body", "endless body"])
    async def test_past_the_bound_is_answer_too_large(self, remote: Remote, shape: str) -> None:
        """A call's (not streamed) body past `answer_limit` of the record limit is
        RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE, its reading stopped there and the connection
        closed (the fake could not write it to its end); it was read whole, however long,
        held in memory."""
        if shape == "long body":
            remote.fake.answer(FakeAnswer("x" * PAST))
        else:
            remote.fake.push(endless_body())
        with pytest.raises(ResourceExhausted) as caught:
            await remote.provider.complete(HI)
        assert caught.value.reason == LLM_ANSWER_TOO_LARGE
        assert caught.value.metadata["record_bytes"] == str(RECORD_BYTES)
        assert int(caught.value.metadata["answer_bytes"]) > answer_limit(RECORD_BYTES)
        assert "nothing of the turn was stored" in caught.value.message
        assert not await remote.fake.written_whole(0)
        assert len(remote.fake.requests) == 1

    async def test_up_to_the_bound_is_read(self, remote: Remote) -> None:
        """A body under the bound is read whole, and the next call on the client works."""
        text = "x" * (answer_limit(RECORD_BYTES) - 4096)
        remote.fake.answer(FakeAnswer(text))
        assert (await remote.provider.complete(HI)).content == text
        remote.fake.answer(FakeAnswer("x" * PAST))
        with pytest.raises(ResourceExhausted):
            await remote.provider.complete(HI)
        remote.fake.answer(FakeAnswer("short"))
        assert (await remote.provider.complete(HI)).content == "short"
