"""A provider's Retry-After longer than the gateway waits for one (`remote`), against the
loopback fake servers through both SDKs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agent_gateway.llm import LLMMessage
from agent_gateway.llm.anthropic_provider import AnthropicProvider
from agent_gateway.llm.deadlines import bounded, caller_deadline
from agent_gateway.llm.openai_provider import OpenAIProvider
from stello.errors import ResourceExhausted, StelloError, Unavailable
from tests.gateway.llm.providers.support import MODES, Mode, call, logged
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import Reply
from tests.support.fake_openai import FakeOpenAI

HI = [LLMMessage("user", "hi")]
TIMEOUT_S = 2.0
"""The providers' timeout: the longest Retry-After their retries wait."""


@dataclass(frozen=True, slots=True)
class Remote:
    """A fake server and a provider talking to it, which retries once."""

    fake: FakeOpenAI | FakeAnthropic
    provider: OpenAIProvider | AnthropicProvider


@pytest.fixture(name="remote", params=["openai", "anthropic"])
async def _remote(request: pytest.FixtureRequest) -> AsyncIterator[Remote]:
    if request.param == "openai":
        async with FakeOpenAI() as fake:
            async with OpenAIProvider(
                model="m", base_url=fake.base_url, timeout_s=TIMEOUT_S, max_retries=1
            ) as provider:
                yield Remote(fake, provider)
    else:
        async with FakeAnthropic() as fake:
            async with AnthropicProvider(
                model="m", api_key="k", base_url=fake.base_url, timeout_s=TIMEOUT_S, max_retries=1
            ) as provider:
                yield Remote(fake, provider)


def refusal(status: int, retry_after: str) -> Reply:
    """An HTTP error answer asking to wait `retry_after` (the header's text)."""
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    return Reply.json(body, status=status, headers=(("retry-after", retry_after),))


class TestRetryAfterPastTheWait:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        ("status", "expected"),
        [(429, ResourceExhausted), (503, Unavailable)],
        ids=["429", "503"],
    )
    async def test_fails_at_once_saying_when_to_retry(
        self,
        remote: Remote,
        caplog: pytest.LogCaptureFixture,
        mode: Mode,
        status: int,
        expected: type[StelloError],
    ) -> None:
        """A 429 or 503 whose Retry-After is longer than the provider's timeout fails at once,
        not retried, with its status, the wait as RetryInfo and a message saying when to
        retry; the log says why it was not retried. The SDKs slept it (Anthropic's, any
        length; OpenAI's, up to two minutes) past the caller's deadline, or retried at
        once."""
        remote.fake.push(refusal(status, "10"), refusal(status, "10"))
        with pytest.raises(expected) as caught:
            await call(remote.provider, mode, HI)
        assert len(remote.fake.requests) == 1
        assert caught.value.retry_after_s == 10.0
        assert "retry in 10 seconds" in caught.value.message, caught.value.message
        line = logged(caplog, caught.value)
        assert "not retried: its Retry-After of 10s is longer than the 2s" in line, line
        assert "STELLO_LLM_TIMEOUT_S" in line

    async def test_a_wait_within_the_timeout_is_retried(self, remote: Remote) -> None:
        """A Retry-After within the timeout is waited and the call retried (as before)."""
        remote.fake.push(refusal(429, "0.01"))
        remote.fake.reply("fine")
        assert (await remote.provider.complete(HI)).content == "fine"
        assert len(remote.fake.requests) == 2

    async def test_an_http_date_past_the_wait(self, remote: Remote) -> None:
        """A Retry-After given as an HTTP date is read the same way."""
        later = "Fri, 31 Dec 2100 23:59:59 GMT"
        remote.fake.push(refusal(429, later), refusal(429, later))
        with pytest.raises(ResourceExhausted) as caught:
            await remote.provider.complete(HI)
        assert len(remote.fake.requests) == 1
        assert "retry in 600 seconds" in caught.value.message


class TestRetryAfterPastTheCallersDeadline:
    @pytest.mark.parametrize("mode", MODES)
    async def test_fails_at_once_within_a_callers_deadline(
        self, remote: Remote, caplog: pytest.LogCaptureFixture, mode: Mode
    ) -> None:
        """A Retry-After within the gateway's wait (1s of 2s) but not within what is left of
        the caller's deadline (`deadlines.bounded`) fails at once, saying when to retry; the
        log says why. The SDKs slept it past the deadline."""
        remote.fake.push(refusal(429, "1"), refusal(429, "1"))
        with pytest.raises(ResourceExhausted) as caught:
            with bounded(time.monotonic() + 0.5):
                await call(remote.provider, mode, HI)
        assert len(remote.fake.requests) == 1
        assert caught.value.retry_after_s == 1.0
        line = logged(caplog, caught.value)
        assert "not retried: its Retry-After of 1s does not fit in the" in line, line
        assert "left of the caller's deadline" in line
        assert caller_deadline.get() is None

    async def test_a_wait_within_the_deadline_is_retried(self, remote: Remote) -> None:
        """A Retry-After that fits in what is left of the caller's deadline is waited."""
        remote.fake.push(refusal(503, "0.01"))
        remote.fake.reply("fine")
        with bounded(time.monotonic() + 30):
            assert (await remote.provider.complete(HI)).content == "fine"
        assert len(remote.fake.requests) == 2
