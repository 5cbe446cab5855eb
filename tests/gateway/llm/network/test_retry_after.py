"""A provider's Retry-After longer than the gateway waits for one (`remote`), against the
loopback fake servers through both SDKs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace

import anthropic._constants
import openai._constants
import pytest

from agent_gateway.llm.deadlines import bounded, caller_deadline
from agent_gateway.llm.network.retries import (
    FIRST_BACKOFF_S,
    LONGEST_BACKOFF_S,
    RETRY_COUNT_HEADER,
    backoff,
)
from stello.errors import DeadlineExceeded, ResourceExhausted, StelloError, Unavailable
from stello.reasons import LLM_TIMEOUT
from tests.gateway.llm.network.support import (
    HI,
    MODES,
    NETWORK,
    Mode,
    Remote,
    busy,
    call,
    closer,
    fake_server,
    logged,
    network_provider,
    refusal,
    remote,
)
from tests.support.fake_http import FakeAnswer, Reply

TIMEOUT_S = 2.0
"""The providers' timeout: the longest Retry-After their retries wait."""


@pytest.fixture(name="remote", params=NETWORK)
async def _remote(request: pytest.FixtureRequest) -> AsyncIterator[Remote]:
    """A fake server and a provider talking to it, which retries once."""
    async with remote(request.param, timeout_s=TIMEOUT_S, max_retries=1) as made:
        yield made


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


class TestNoAnswerPastTheCallersDeadline:
    """A request that got no answer (a connection closed unanswered): the SDKs' backoff
    before retrying it is not slept past the caller's deadline either."""

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", NETWORK)
    async def test_the_log_says_why_it_stopped(
        self, caplog: pytest.LogCaptureFixture, name: str, mode: Mode
    ) -> None:
        """With 1.3s left and 3 retries, the first backoff (0.5s) is slept, the second (1s)
        no longer fits: the call fails UNAVAILABLE after one retry, and the log says so
        and why (it said "after 3 retries")."""
        async with closer() as server:
            async with network_provider(
                name, server.base_url(name), timeout_s=TIMEOUT_S, max_retries=3
            ) as provider:
                with pytest.raises(Unavailable) as caught:
                    with bounded(time.monotonic() + 1.3):
                        await call(provider, mode, HI)
        assert server.connections == 2
        assert "cannot be reached" in caught.value.message, caught.value.message
        line = logged(caplog, caught.value)
        assert "cannot reach the server after 1 retry; not retried again: the next" in line, line
        assert "backoff of up to 1s does not fit in the" in line, line
        assert "left of the caller's deadline" in line, line


class TestBackoffPastTheCallersDeadline:
    """An answer the SDKs retry that asks no wait: their own backoff before the next retry
    (`retries.backoff`) is not slept past the caller's deadline either."""

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        ("status", "expected"),
        [(429, ResourceExhausted), (503, Unavailable)],
        ids=["429", "503"],
    )
    async def test_fails_at_once_within_a_callers_deadline(
        self,
        remote: Remote,
        caplog: pytest.LogCaptureFixture,
        mode: Mode,
        status: int,
        expected: type[StelloError],
    ) -> None:
        """A 429 or 503 without Retry-After, with less left of the caller's deadline than
        the SDK's first backoff (up to 0.5s), fails at once with its status, saying to
        retry later; the log says why it was not retried. The SDKs slept their backoff and
        retried, past the deadline."""
        remote.fake.push(busy(status), busy(status))
        with pytest.raises(expected) as caught:
            with bounded(time.monotonic() + 0.3):
                await call(remote.provider, mode, HI)
        assert len(remote.fake.requests) == 1
        assert caught.value.retry_after_s is None
        assert "retry later" in caught.value.message, caught.value.message
        line = logged(caplog, caught.value)
        assert "not retried: the next retry's backoff of up to 0.5s does not fit" in line, line
        assert "left of the caller's deadline" in line

    async def test_the_backoff_grows_with_the_retries_made(self, remote: Remote) -> None:
        """The backoff weighed is the one before the next retry: with 1.3s left, the first
        (0.5s) fits and is slept, the second (1s, after one retry) no longer does."""
        async with network_provider(
            remote.provider.name, remote.fake.base_url, max_retries=3
        ) as provider:
            remote.fake.push(*(busy(503) for _ in range(4)))
            with pytest.raises(Unavailable):
                with bounded(time.monotonic() + 1.3):
                    await provider.complete(HI)
        assert len(remote.fake.requests) == 2

    async def test_a_backoff_within_the_deadline_is_slept(self, remote: Remote) -> None:
        """A backoff that fits in what is left of the caller's deadline is slept, and the
        call retried (as before)."""
        remote.fake.push(busy(503))
        remote.fake.reply("fine")
        with bounded(time.monotonic() + 30):
            assert (await remote.provider.complete(HI)).content == "fine"
        assert len(remote.fake.requests) == 2


class TestAnAttemptPastTheCallersDeadline:
    """A request the server answers slowly: the attempt waits for it the provider's timeout
    at most, and no longer than what is left of the caller's deadline."""

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", NETWORK)
    async def test_it_ends_by_the_callers_deadline(
        self, caplog: pytest.LogCaptureFixture, name: str, mode: Mode
    ) -> None:
        """A server that would answer in 3s, a provider whose timeout is 30s, a caller with
        0.3s left: the attempt ends by the caller's deadline, the connection closed before
        the answer, not retried (no backoff fits), and the call is DEADLINE_EXCEEDED,
        LLM_TIMEOUT; the log says the wait was what was left of the caller's deadline. The
        attempt waited the 30s timeout, past the deadline, and got the answer."""
        async with fake_server(name) as fake:
            fake.stall(3.0)
            fake.stall(3.0)
            async with network_provider(name, fake.base_url, timeout_s=30.0) as provider:
                with pytest.raises(DeadlineExceeded) as caught:
                    with bounded(time.monotonic() + 0.3):
                        await call(provider, mode, HI)
            assert len(fake.requests) == 1
            assert not await fake.written_whole(0)
        assert caught.value.reason == LLM_TIMEOUT
        assert "did not answer in time" in caught.value.message
        line = logged(caplog, caught.value)
        assert "what was left of the caller's deadline" in line, line

    @pytest.mark.parametrize("name", NETWORK)
    async def test_the_stream_it_opened_reads_within_it(
        self, caplog: pytest.LogCaptureFixture, name: str
    ) -> None:
        """A stream whose head comes at once and its events 1s apart, a provider whose
        timeout is 30s, a caller with 0.5s left: the stream breaks off by the caller's
        deadline, DEADLINE_EXCEEDED, not retried (it was read to its end, past the
        deadline)."""
        async with fake_server(name) as fake:
            fake.push(lambda request: slowed(fake.render(FakeAnswer("hello there"), request)))
            async with network_provider(name, fake.base_url, timeout_s=30.0) as provider:
                with pytest.raises(DeadlineExceeded) as caught:
                    with bounded(time.monotonic() + 0.5):
                        await call(provider, "stream", HI)
            assert len(fake.requests) == 1
        assert caught.value.reason == LLM_TIMEOUT
        line = logged(caplog, caught.value)
        assert "no next piece of the answer within" in line, line
        assert "what was left of the caller's deadline" in line, line

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", NETWORK)
    async def test_with_nothing_left_no_request_is_sent(self, name: str, mode: Mode) -> None:
        """A call made once the caller's deadline has passed sends no request: it is
        DEADLINE_EXCEEDED at once (it was sent, and its answer read, for no one)."""
        async with fake_server(name) as fake:
            fake.reply("too late")
            async with network_provider(name, fake.base_url, timeout_s=30.0) as provider:
                with pytest.raises(DeadlineExceeded) as caught:
                    with bounded(time.monotonic() - 1):
                        await call(provider, mode, HI)
            assert fake.requests == []
        assert caught.value.reason == LLM_TIMEOUT

    @pytest.mark.parametrize("name", NETWORK)
    async def test_a_fast_answer_within_it_is_read(self, name: str) -> None:
        """An answer within what is left of the caller's deadline is read as before."""
        async with fake_server(name) as fake:
            fake.reply("fine")
            async with network_provider(name, fake.base_url, timeout_s=30.0) as provider:
                with bounded(time.monotonic() + 30):
                    assert (await provider.complete(HI)).content == "fine"


def slowed(reply: Reply) -> Reply:
    """`reply` (a stream) sending its head at once, then each of its events 1s apart."""
    return replace(reply, chunk_delay_s=1.0)


class TestBackoff:
    def test_doubles_per_retry_made_up_to_the_longest(self) -> None:
        """0.5s before the first retry, doubled per retry made, at most 8s."""
        assert [backoff(n) for n in (0, 1, 2, 3, 4, 5, 1000)] == [
            0.5,
            1.0,
            2.0,
            4.0,
            8.0,
            8.0,
            8.0,
        ]

    def test_is_the_sdks_backoff(self) -> None:
        """The bounds are both SDKs' own (a new SDK version that changes them fails here)."""
        for constants in (openai._constants, anthropic._constants):
            assert constants.INITIAL_RETRY_DELAY == FIRST_BACKOFF_S
            assert constants.MAX_RETRY_DELAY == LONGEST_BACKOFF_S


SDK_RETRY_METHODS = ("_should_retry", "_sleep_for_retry", "_calculate_retry_timeout")
"""The SDKs' private methods their own retry loop decides and sleeps with."""


@pytest.fixture(name="sdk_retries_refused")
def _sdk_retries_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both SDKs' private retry methods raise if called: an SDK version that renamed them."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the SDK's private retry method was called")

    for client in (openai.AsyncOpenAI, anthropic.AsyncAnthropic):
        for name in SDK_RETRY_METHODS:
            monkeypatch.setattr(client, name, refused)


@pytest.mark.usefixtures("sdk_retries_refused")
class TestRetriesWithoutTheSdksPrivateMethods:
    """The retries are the gateway's own loop around each request (`retries.Retries`): the
    SDKs' clients make none, and nothing of theirs that is private decides or sleeps one."""

    @pytest.mark.parametrize("mode", MODES)
    async def test_a_retry_after_within_the_wait_is_retried(
        self, remote: Remote, mode: Mode
    ) -> None:
        """A 429 whose Retry-After fits is waited and the call retried (it went through the
        SDK's `_should_retry` and `_sleep_for_retry`)."""
        remote.fake.push(refusal(429, "0.01"))
        remote.fake.reply("fine")
        await call(remote.provider, mode, HI)
        assert len(remote.fake.requests) == 2

    async def test_a_retry_after_past_the_wait_fails_at_once(self, remote: Remote) -> None:
        """A Retry-After longer than the gateway waits still fails at once, not retried."""
        remote.fake.push(refusal(503, "10"), refusal(503, "10"))
        with pytest.raises(Unavailable) as caught:
            await remote.provider.complete(HI)
        assert len(remote.fake.requests) == 1
        assert caught.value.retry_after_s == 10.0

    @pytest.mark.parametrize("name", NETWORK)
    async def test_a_request_with_no_answer_is_retried(self, name: str) -> None:
        """A connection closed unanswered is retried, the backoff slept (it went through the
        SDK's `_sleep_for_retry`)."""
        async with closer() as server:
            async with network_provider(
                name, server.base_url(name), timeout_s=TIMEOUT_S, max_retries=1
            ) as provider:
                with pytest.raises(Unavailable):
                    await provider.complete(HI)
        assert server.connections == 2

    async def test_each_request_says_the_retries_made_before_it(self, remote: Remote) -> None:
        """The retry count goes with each request (`retries.RETRY_COUNT_HEADER`), as the
        SDKs sent it: what the log's "after N retries" is read from."""
        remote.fake.push(refusal(429, "0.01"))
        remote.fake.reply("fine")
        await remote.provider.complete(HI)
        assert [r.headers[RETRY_COUNT_HEADER] for r in remote.fake.requests] == ["0", "1"]

    async def test_an_answer_saying_not_to_retry_is_not_retried(self, remote: Remote) -> None:
        """An error answer's ``x-should-retry: false`` wins over its status (a 503), as it
        did in the SDKs (the fake servers send it with a request they could not read)."""
        remote.fake.push(should_retry(503, "false"))
        remote.fake.reply("fine")
        with pytest.raises(Unavailable):
            await remote.provider.complete(HI)
        assert len(remote.fake.requests) == 1

    async def test_an_answer_saying_to_retry_is_retried(self, remote: Remote) -> None:
        """An error answer's ``x-should-retry: true`` wins over its status (a 400)."""
        remote.fake.push(should_retry(400, "true"))
        remote.fake.reply("fine")
        assert (await remote.provider.complete(HI)).content == "fine"
        assert len(remote.fake.requests) == 2


def should_retry(status: int, said: str) -> Reply:
    """An error answer of `status` whose ``x-should-retry`` header says `said`."""
    body = {"error": {"message": "no", "type": "api_error"}}
    headers = (("x-should-retry", said), ("retry-after-ms", "1"))
    return Reply.json(body, status=status, headers=headers)
