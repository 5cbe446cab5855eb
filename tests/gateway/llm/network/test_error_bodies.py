"""The body of a provider's error answer is read up to a bound (`error_bodies`), against the
loopback fake servers through both SDKs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from agent_gateway.llm.network.error_bodies import ERROR_BODY_LIMIT
from stello.errors import DeadlineExceeded, FailedPrecondition, StelloError, Unavailable
from tests.gateway.llm.network.support import (
    HI,
    MODES,
    NETWORK,
    Mode,
    Remote,
    call,
    logged,
    remote,
)
from tests.support.fake_http import Reply

PIECE = b"x" * (64 * 1024)


@pytest.fixture(name="remote", params=NETWORK)
async def _remote(request: pytest.FixtureRequest) -> AsyncIterator[Remote]:
    """A fake server and a provider talking to it, which retries once and waits 1.5 s for
    a read (a hung body costs each of its requests that: 3 s made the suite 20 s longer)."""
    async with remote(request.param, timeout_s=1.5, max_retries=1) as made:
        yield made


def endless(status: int) -> Reply:
    """An error answer whose body passes the bound, then never ends (the server hangs)."""
    pieces = ERROR_BODY_LIMIT // len(PIECE) + 2
    return Reply(
        status=status,
        headers=(("content-type", "text/plain"), ("retry-after", "0.01")),
        chunks=(PIECE,) * (pieces + 1),
    ).hung_after(pieces)


def broken(status: int, how: str) -> Reply:
    """An error answer whose body begins, then breaks off: the server hangs ("hung"), or
    resets the connection ("reset")."""
    reply = Reply(
        status=status,
        headers=(("content-type", "application/json"), ("retry-after", "0.01")),
        chunks=(b'{"error": {"message": "no', b' such key"}}'),
    )
    return reply.hung_after(1) if how == "hung" else reply.dropped_after(1)


class TestErrorBodies:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        ("status", "expected"),
        [(400, FailedPrecondition), (503, Unavailable)],
        ids=["400", "503"],
    )
    async def test_an_endless_error_body_is_cut(
        self,
        remote: Remote,
        caplog: pytest.LogCaptureFixture,
        mode: Mode,
        status: int,
        expected: type[StelloError],
    ) -> None:
        """An error answer whose body goes on past the bound is read no further: the call
        fails as its status says, the log saying the body was cut. The SDKs read it whole
        (they waited for its end until the provider's timeout, DEADLINE_EXCEEDED)."""
        remote.fake.push(endless(status), endless(status))
        with caplog.at_level(logging.WARNING), pytest.raises(expected) as caught:
            await call(remote.provider, mode, HI)
        line = logged(caplog, caught.value)
        assert f"HTTP {status}: [the body was cut at {ERROR_BODY_LIMIT // 1024} KiB] xxx" in line
        assert line.count("x") < 1000, line

    @pytest.mark.parametrize("mode", MODES)
    async def test_a_small_error_body_is_read_as_before(
        self, remote: Remote, caplog: pytest.LogCaptureFixture, mode: Mode
    ) -> None:
        """An error body within the bound is the provider's message, in the log."""
        remote.fake.fail(400, "no such parameter")
        with caplog.at_level(logging.WARNING), pytest.raises(FailedPrecondition) as caught:
            await call(remote.provider, mode, HI)
        line = logged(caplog, caught.value)
        assert "HTTP 400: no such parameter" in line and "cut" not in line, line


class TestBrokenErrorBodies:
    """An error answer whose status came and whose body broke off (hung past the timeout,
    or reset) fails as its status says: the status decides a retry, not the body."""

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("how", ["hung", "reset"])
    async def test_a_refusal_is_not_retried(
        self, remote: Remote, caplog: pytest.LogCaptureFixture, mode: Mode, how: str
    ) -> None:
        """A 401 whose body broke off is the rejected key, not retried; the log says the
        body broke off. The request was retried (the SDK took the broken body for a request
        that got no answer), and the call then failed as a timeout (DEADLINE_EXCEEDED,
        "raise STELLO_LLM_TIMEOUT_S") or as a provider that cannot be reached."""
        remote.fake.push(broken(401, how), broken(401, how))
        with caplog.at_level(logging.WARNING), pytest.raises(FailedPrecondition) as caught:
            await call(remote.provider, mode, HI)
        assert len(remote.fake.requests) == 1
        line = logged(caplog, caught.value)
        assert "HTTP 401: [the body broke off after 25 bytes: " in line, line
        assert '{"error": {"message": "no' in line, line

    @pytest.mark.parametrize("mode", MODES)
    async def test_a_retried_status_is_retried_as_its_status_says(
        self, remote: Remote, caplog: pytest.LogCaptureFixture, mode: Mode
    ) -> None:
        """A 503 whose body hung is retried as a 503 is (its Retry-After slept), then fails
        UNAVAILABLE, not DEADLINE_EXCEEDED."""
        remote.fake.push(broken(503, "hung"), broken(503, "hung"))
        with caplog.at_level(logging.WARNING), pytest.raises(Unavailable) as caught:
            await call(remote.provider, mode, HI)
        assert not isinstance(caught.value, DeadlineExceeded)
        assert len(remote.fake.requests) == 2
        line = logged(caplog, caught.value)
        assert "HTTP 503: [the body broke off after 25 bytes: ReadTimeout]" in line, line
