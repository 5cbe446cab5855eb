"""What a turn does with a provider's answer it cannot use (DESIGN §4.3, §6).

Real providers (the openai and anthropic SDKs) against the loopback fake servers,
behind a real gateway:

- an answer streamed far past what a record may hold (STELLO_MAX_RECORD_BYTES):
  many events, or one endless line. The gateway stops reading at its bound and
  closes the connection (the fake never writes the stream to its end): SendStream
  ends RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE, nothing is stored, and the turn
  sent again works. It read on until the stream ended, however long, holding all
  of it in memory. So with Send, whose answer comes in one body (not streamed): the
  body is read up to the same bound; it was read whole, however long;
- an answer the provider's content filter stopped with no text: UNAVAILABLE
  LLM_UNAVAILABLE saying the content filter stopped it and that sending the same
  again will likely be refused again. It was told "the model answered nothing...
  send it again".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import asyncpg
import grpc
import pytest

from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.agent.v1 import agent_pb2
from stello.errors import error_info_metadata, error_info_reason
from stello.reasons import LLM_ANSWER_TOO_LARGE, LLM_UNAVAILABLE
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import StackMaker, row_counts, rpc_error
from tests.gateway.llm.network.support import NETWORK, fake_server, network_provider
from tests.gateway.turns_support import send, stream_events
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import FakeAnswer, Reply
from tests.support.fake_openai import FakeOpenAI

pytestmark = pytest.mark.sql

RECORD_BYTES = 1 << 20
"""STELLO_MAX_RECORD_BYTES by default (the test stack's, and the providers')."""
PIECE = 16 * 1024
"""The bytes of one event's text (or of one piece of an endless line)."""
PIECES = 24 * RECORD_BYTES // PIECE
"""Pieces of a stream far past the bound and past what loopback's socket buffers hold, so
a reading stopped early shows as a connection the fake could not write to its end."""


FILTERED = {"openai": "content_filter", "anthropic": "refusal"}
"""Each network provider's stop for an answer its content filter stopped."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A fake provider server, the real provider that talks to it, and its filter's stop."""

    fake: FakeOpenAI | FakeAnthropic
    provider: Callable[[str], OpenAIProvider | AnthropicProvider]
    filtered: str


@pytest.fixture(name="endpoint", params=NETWORK)
async def _endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Endpoint]:
    name = request.param
    async with fake_server(name) as fake:
        yield Endpoint(
            fake,
            lambda url: network_provider(name, url, timeout_s=30.0, max_retries=0),
            FILTERED[name],
        )


def endless_line() -> Reply:
    """A stream of one ``data:`` line that does not end before 24 records' worth of bytes."""
    return Reply(
        headers=(("content-type", "text/event-stream"),),
        chunks=(b'data: {"text": "', *((b"x" * PIECE,) * PIECES)),
    )


class TestAnswerPastTheBound:
    @pytest.mark.parametrize("shape", ["many events", "one endless line"])
    async def test_reading_stops_and_nothing_is_stored(
        self, make_stack: StackMaker, pool: asyncpg.Pool, endpoint: Endpoint, shape: str
    ) -> None:
        """SendStream ends RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE (answer_bytes over the
        record limit), the fake's stream was cut off (its connection closed before the
        end), nothing is stored, and the turn sent again works."""
        fake = endpoint.fake
        async with endpoint.provider(fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            before = await row_counts(pool, stack.space)
            if shape == "many events":
                fake.answer(FakeAnswer("x" * (PIECE * PIECES), chunks=PIECES))
            else:
                fake.push(endless_line())
            error = await rpc_error(stream_events(stack, root.id, "write a lot"))
            assert (error.code(), error_info_reason(error)) == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                LLM_ANSWER_TOO_LARGE,
            )
            details = error.details() or ""
            assert f"over the {RECORD_BYTES} bytes a record may hold" in details, details
            assert "nothing of the turn was stored" in details
            metadata = error_info_metadata(error)
            assert int(metadata["answer_bytes"]) > RECORD_BYTES
            assert metadata["record_bytes"] == str(RECORD_BYTES)
            assert not await fake.written_whole(len(fake.requests) - 1)
            assert await row_counts(pool, stack.space) == before
            fake.reply("a short answer")
            reply = await send(stack, root.id, "again")
            assert reply.assistant.content == "a short answer"


class TestBodyPastTheBound:
    async def test_send_stops_reading_and_stores_nothing(
        self, make_stack: StackMaker, pool: asyncpg.Pool, endpoint: Endpoint
    ) -> None:
        """Send, answered one body far past the bound: RESOURCE_EXHAUSTED
        LLM_ANSWER_TOO_LARGE, the fake's body cut off (its connection closed before the
        end), nothing stored, and the turn sent again works."""
        fake = endpoint.fake
        async with endpoint.provider(fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            before = await row_counts(pool, stack.space)
            fake.answer(FakeAnswer("x" * (PIECE * PIECES)))
            error = await rpc_error(send(stack, root.id, "write a lot"))
            assert (error.code(), error_info_reason(error)) == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                LLM_ANSWER_TOO_LARGE,
            )
            details = error.details() or ""
            assert f"over the {RECORD_BYTES} bytes a record may hold" in details, details
            assert "nothing of the turn was stored" in details
            assert error_info_metadata(error)["record_bytes"] == str(RECORD_BYTES)
            assert not await fake.written_whole(len(fake.requests) - 1)
            assert await row_counts(pool, stack.space) == before
            fake.reply("a short answer")
            reply = await send(stack, root.id, "again")
            assert reply.assistant.content == "a short answer"

    async def test_consolidate_stops_reading_and_keeps_the_memory(
        self, make_stack: StackMaker, endpoint: Endpoint
    ) -> None:
        """Consolidate, answered one body far past the bound: RESOURCE_EXHAUSTED
        LLM_ANSWER_TOO_LARGE, the fake's body cut off, the memory kept."""
        fake = endpoint.fake
        async with endpoint.provider(fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            fake.reply("an answer")
            await send(stack, root.id, "hi")
            memory = storage_pb2.GetMemoryRequest(space_id=stack.space.sid, session_id=root.id)
            before = await stack.storage.GetMemory(memory)
            fake.answer(FakeAnswer("m" * (PIECE * PIECES)))
            consolidate = agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=root.id)
            error = await rpc_error(stack.gw.Consolidate(consolidate))
            assert (error.code(), error_info_reason(error)) == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                LLM_ANSWER_TOO_LARGE,
            )
            assert not await fake.written_whole(len(fake.requests) - 1)
            assert await stack.storage.GetMemory(memory) == before


class TestFilteredAnswer:
    @pytest.mark.parametrize("streamed", [False, True], ids=["Send", "SendStream"])
    async def test_the_client_is_told_the_filter_stopped_it(
        self, make_stack: StackMaker, pool: asyncpg.Pool, endpoint: Endpoint, streamed: bool
    ) -> None:
        """An empty answer the content filter stopped is UNAVAILABLE LLM_UNAVAILABLE naming
        the filter and saying the same message will likely be refused again (not "send it
        again"); nothing is stored, and another message works."""
        fake = endpoint.fake
        async with endpoint.provider(fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            before = await row_counts(pool, stack.space)
            fake.answer(FakeAnswer(stop=endpoint.filtered))
            call = stream_events(stack, root.id, "hm") if streamed else send(stack, root.id, "hm")
            error = await rpc_error(call)
            assert (error.code(), error_info_reason(error)) == (
                grpc.StatusCode.UNAVAILABLE,
                LLM_UNAVAILABLE,
            )
            details = error.details() or ""
            assert details.startswith("the LLM provider's content filter stopped"), details
            assert "will likely be refused again" in details
            assert "send it again" not in details
            assert await row_counts(pool, stack.space) == before
            fake.reply("fine")
            assert (await send(stack, root.id, "something else")).assistant.content == "fine"

    async def test_an_empty_answer_unfiltered_still_says_send_it_again(
        self, make_stack: StackMaker, endpoint: Endpoint
    ) -> None:
        """An empty answer that ended as usual keeps its message: send it again."""
        fake = endpoint.fake
        async with endpoint.provider(fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            fake.answer(FakeAnswer())
            error = await rpc_error(send(stack, root.id, "hm"))
            details = error.details() or ""
            assert details.startswith("the model answered nothing"), details
            assert "send it again" in details
