"""A provider's Retry-After against the client's deadline (`agent_gateway.llm.deadlines`).

Real providers (the openai and anthropic SDKs) against the loopback fake servers, behind a
real gateway: a 429 or 503 asking to wait longer than the client's Send has left fails at
once with the provider's status and RetryInfo, instead of the SDK sleeping past the
deadline (the client then got a bare DEADLINE_EXCEEDED).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import pytest

from agent_gateway.llm.anthropic_provider import AnthropicProvider
from agent_gateway.llm.openai_provider import OpenAIProvider
from stello.agent.v1 import agent_pb2
from stello.errors import retry_delay
from tests.gateway.conftest import StackMaker, rpc_error
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import Reply
from tests.support.fake_openai import FakeOpenAI

pytestmark = pytest.mark.sql

TIMEOUT_S = 30.0
"""The providers' timeout: a Retry-After within it is one the SDK would sleep."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A fake provider server and the real provider that talks to it (one retry)."""

    fake: FakeOpenAI | FakeAnthropic
    provider: Callable[[str], OpenAIProvider | AnthropicProvider]


@pytest.fixture(name="endpoint", params=["openai", "anthropic"])
async def _endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Endpoint]:
    if request.param == "openai":
        async with FakeOpenAI() as fake:
            yield Endpoint(
                fake,
                lambda url: OpenAIProvider(
                    model="m", base_url=url, timeout_s=TIMEOUT_S, max_retries=1
                ),
            )
    else:
        async with FakeAnthropic() as fake:
            yield Endpoint(
                fake,
                lambda url: AnthropicProvider(
                    model="m", api_key="k", base_url=url, timeout_s=TIMEOUT_S, max_retries=1
                ),
            )


def refusal(status: int, retry_after: str) -> Reply:
    """An HTTP error answer asking to wait `retry_after` (the header's text)."""
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    return Reply.json(body, status=status, headers=(("retry-after", retry_after),))


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
        async with endpoint.provider(endpoint.fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            if streamed:
                streamed_request = agent_pb2.SendStreamRequest(
                    space_id=stack.space.sid, session_id=root.id, content="hi"
                )
                call = stack.gw.SendStream(
                    streamed_request, metadata=stack.space.metadata, timeout=2.0
                )
                error = await rpc_error(_drain(call))
            else:
                request = agent_pb2.SendRequest(
                    space_id=stack.space.sid, session_id=root.id, content="hi"
                )
                error = await rpc_error(stack.gw.Send(request, timeout=2.0))
            assert error.code() == code, error.details()
            assert retry_delay(error) == 3.0
            assert "retry in 3 seconds" in (error.details() or "")
            assert len(endpoint.fake.requests) == 1
            assert not [r for r in await stack.records(root.id) if r.content == "hi"]


async def _drain(call: grpc.aio.UnaryStreamCall) -> None:  # type: ignore[type-arg]
    async for _ in call:
        pass
