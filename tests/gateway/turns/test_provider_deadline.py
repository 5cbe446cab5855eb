"""A provider's Retry-After, or the SDK's backoff, against the client's deadline
(`agent_gateway.llm.deadlines`).

Real providers (the openai and anthropic SDKs) against the loopback fake servers, behind a
real gateway: a 429 or 503 asking to wait longer than the client's Send has left fails at
once with the provider's status and RetryInfo, and one asking no wait fails with the
provider's status once the SDK's next backoff no longer fits, instead of the SDK sleeping
past the deadline (the client then got a bare DEADLINE_EXCEEDED). So does the model call
of a turn's compression, before the turn's own, and a COMPRESS fork's summary; and so
does the SDK's backoff after a request that got no answer (a timeout, a connection closed
or refused).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import grpc
import pytest

from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, retry_delay
from stello.reasons import LLM_TIMEOUT, LLM_UNAVAILABLE
from tests.gateway.conftest import Stack, StackMaker, record, row_counts, rpc_error
from tests.gateway.llm.network.support import (
    NETWORK,
    busy,
    closer,
    fake_server,
    network_provider,
    refusal,
)
from tests.gateway.turns_support import compression_cache
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import Reply
from tests.support.fake_openai import FakeOpenAI

pytestmark = pytest.mark.sql

TIMEOUT_S = 30.0
"""The providers' timeout: a Retry-After within it is one the SDK would sleep."""
WINDOW = 128_000
"""The providers' window: a new session's turn needs no compression."""
SMALL_WINDOW = 2_000
"""A window 30 records of 200 characters overflow: the turn compresses first."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A fake provider server and the name of the real provider to talk to it."""

    fake: FakeOpenAI | FakeAnthropic
    name: str

    def provider(self, retries: int, window: int) -> OpenAIProvider | AnthropicProvider:
        """The real provider talking to the fake, with `retries` and a window of `window`."""
        return network_provider(
            self.name,
            self.fake.base_url,
            timeout_s=TIMEOUT_S,
            max_retries=retries,
            max_context_tokens=window,
        )


@pytest.fixture(name="endpoint", params=NETWORK)
async def _endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Endpoint]:
    async with fake_server(request.param) as fake:
        yield Endpoint(fake, request.param)


async def seed(stack: Stack, session_id: str, count: int) -> list[common_pb2.Record]:
    """`count` alternating user/assistant records of 200 characters."""
    roles = ("user", "assistant")
    return await stack.append(
        session_id, *(record(roles[i % 2], f"{i:04d}" + "x" * 196) for i in range(count))
    )


async def send(stack: Stack, session_id: str, *, streamed: bool) -> grpc.aio.AioRpcError:
    """The error of a Send (or a SendStream) of "hi" with a deadline of 2s."""
    if streamed:
        request = agent_pb2.SendStreamRequest(
            space_id=stack.space.sid, session_id=session_id, content="hi"
        )
        call = stack.gw.SendStream(request, metadata=stack.space.metadata, timeout=2.0)
        return await rpc_error(_drain(call))
    return await rpc_error(
        stack.gw.Send(
            agent_pb2.SendRequest(space_id=stack.space.sid, session_id=session_id, content="hi"),
            timeout=2.0,
        )
    )


class TestRetryAfterPastTheDeadline:
    @pytest.mark.parametrize(
        ("status", "code"),
        [(429, grpc.StatusCode.RESOURCE_EXHAUSTED), (503, grpc.StatusCode.UNAVAILABLE)],
        ids=["429", "503"],
    )
    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_the_client_is_told_when_to_retry(
        self,
        make_stack: StackMaker,
        endpoint: Endpoint,
        status: int,
        code: grpc.StatusCode,
        streamed: bool,
    ) -> None:
        """A Retry-After of 3s, within the gateway's own wait but past the 2s the client's
        Send has, is not slept: the client gets the provider's status and RetryInfo of 3s
        (it got DEADLINE_EXCEEDED, the SDK sleeping past its deadline); nothing is stored."""
        endpoint.fake.push(refusal(status, "3"), refusal(status, "3"))
        async with endpoint.provider(1, WINDOW) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            error = await send(stack, root.id, streamed=streamed)
            assert error.code() == code, error.details()
            assert retry_delay(error) == 3.0
            assert "retry in 3 seconds" in (error.details() or "")
            assert len(endpoint.fake.requests) == 1
            assert not [r for r in await stack.records(root.id) if r.content == "hi"]


class TestBackoffPastTheDeadline:
    @pytest.mark.parametrize(
        ("status", "code"),
        [(429, grpc.StatusCode.RESOURCE_EXHAUSTED), (503, grpc.StatusCode.UNAVAILABLE)],
        ids=["429", "503"],
    )
    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_the_client_gets_the_providers_status(
        self,
        make_stack: StackMaker,
        endpoint: Endpoint,
        status: int,
        code: grpc.StatusCode,
        streamed: bool,
    ) -> None:
        """A 429 or 503 asking no wait, answered to every retry (3): the SDK's backoffs
        (0.5s, 1s, 2s) pass the 2s the client's Send has, and the first that no longer fits
        is not slept: the client gets the provider's status, to retry later (it got
        DEADLINE_EXCEEDED, the SDK sleeping past its deadline); nothing is stored."""
        endpoint.fake.push(*(busy(status) for _ in range(4)))
        async with endpoint.provider(3, WINDOW) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            error = await send(stack, root.id, streamed=streamed)
            assert error.code() == code, error.details()
            assert "retry later" in (error.details() or "")
            assert retry_delay(error) is None
            assert len(endpoint.fake.requests) < 4
            assert not [r for r in await stack.records(root.id) if r.content == "hi"]


class TestCompressionPastTheDeadline:
    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_the_client_is_told_when_to_retry(
        self, make_stack: StackMaker, endpoint: Endpoint, streamed: bool
    ) -> None:
        """The turn's compression, before its model call, is made knowing the client's
        deadline as that call is: a 429 to the compressor asking 3s, past the 2s the
        client's Send has, is not slept; the client gets RESOURCE_EXHAUSTED and RetryInfo
        of 3s (it got DEADLINE_EXCEEDED); nothing is stored, no summary either."""
        endpoint.fake.push(refusal(429, "3"), refusal(429, "3"))
        async with endpoint.provider(1, SMALL_WINDOW) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            seeded = await seed(stack, root.id, 30)
            error = await send(stack, root.id, streamed=streamed)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
            assert retry_delay(error) == 3.0
            assert "retry in 3 seconds" in (error.details() or "")
            assert len(endpoint.fake.requests) == 1
            assert b"compression assistant" in endpoint.fake.requests[0].body
            assert await stack.records(root.id) == seeded
            assert await compression_cache(stack, root.id) is None


class TestForkSummaryPastTheDeadline:
    async def test_the_client_is_told_when_to_retry(
        self, make_stack: StackMaker, endpoint: Endpoint, pool: asyncpg.Pool
    ) -> None:
        """A COMPRESS fork's summary is made knowing the client's deadline, as a turn's
        compression is: a 429 to it asking 3s, past the 2s the client's Fork has, is not
        slept; the client gets RESOURCE_EXHAUSTED and RetryInfo of 3s (it got
        DEADLINE_EXCEEDED); nothing is made, no provisional session nor the request's
        claim: the same request, retried, makes the fork."""
        endpoint.fake.push(refusal(429, "3"), refusal(429, "3"))
        async with endpoint.provider(1, WINDOW) as provider:
            stack = await make_stack(provider, fake_summarizer=False)
            root = await stack.root()
            await seed(stack, root.id, 4)
            before = await row_counts(pool, stack.space)
            request = agent_pb2.ForkRequest(
                space_id=stack.space.sid,
                source_session_id=root.id,
                label="digest",
                context=common_pb2.FORK_CONTEXT_COMPRESS,
                request_id="fork-past-the-deadline",
            )
            error = await rpc_error(stack.gw.Fork(request, timeout=2.0))
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
            assert retry_delay(error) == 3.0
            assert "retry in 3 seconds" in (error.details() or "")
            assert len(endpoint.fake.requests) == 1
            assert await row_counts(pool, stack.space) == before
            assert list((await stack.view(root.id)).node.children) == []
            endpoint.fake.reply("the parent's story")
            reply: agent_pb2.ForkResponse = await stack.gw.Fork(request, timeout=10.0)
            assert list((await stack.view(root.id)).node.children) == [reply.session.id]


class TestNoAnswerPastTheDeadline:
    """A request that got no HTTP answer: the provider's retries (`retries.Retries`) retry it
    after their backoff; a backoff that does not fit in the client's deadline is not slept
    either (`retries.unanswered_wait`)."""

    async def test_a_timeout_fails_as_one(self, make_stack: StackMaker, endpoint: Endpoint) -> None:
        """A provider that answers nothing within its 0.4s timeout, against a Send of 2s
        with 3 retries: once the SDK's next backoff no longer fits, the client gets the
        provider's timeout (DEADLINE_EXCEEDED, LLM_TIMEOUT, 'did not answer in time'; it
        got a bare DEADLINE_EXCEEDED, the SDK sleeping past its deadline); nothing is
        stored."""
        endpoint.fake.push(*(Reply.json({}, delay_s=30.0) for _ in range(4)))
        settings = {"timeout_s": 0.4, "max_retries": 3, "max_context_tokens": WINDOW}
        async with network_provider(endpoint.name, endpoint.fake.base_url, **settings) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            error = await send(stack, root.id, streamed=False)
            assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error.details()
            assert error_info_reason(error) == LLM_TIMEOUT, error.details()
            assert "did not answer in time" in (error.details() or "")
            assert len(endpoint.fake.requests) < 4
            assert not [r for r in await stack.records(root.id) if r.content == "hi"]

    @pytest.mark.parametrize("name", NETWORK)
    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_a_closed_connection_fails_unreachable(
        self, make_stack: StackMaker, name: str, streamed: bool
    ) -> None:
        """A server that closes every connection unanswered, 3 retries: the SDK's backoffs
        (0.5s, 1s, 2s) pass the 2s the client's Send has, and the first that no longer fits
        is not slept: the client gets UNAVAILABLE, LLM_UNAVAILABLE, 'cannot be reached'
        (it got a bare DEADLINE_EXCEEDED); nothing is stored."""
        async with closer() as server:
            settings = {"timeout_s": TIMEOUT_S, "max_retries": 3, "max_context_tokens": WINDOW}
            async with network_provider(name, server.base_url(name), **settings) as provider:
                stack = await make_stack(provider)
                root = await stack.root()
                error = await send(stack, root.id, streamed=streamed)
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
                assert error_info_reason(error) == LLM_UNAVAILABLE, error.details()
                assert "cannot be reached" in (error.details() or "")
                assert 0 < server.connections < 4
                assert not [r for r in await stack.records(root.id) if r.content == "hi"]


async def _drain(call: grpc.aio.UnaryStreamCall) -> None:  # type: ignore[type-arg]
    async for _ in call:
        pass
