"""What the network providers share: tool-argument parsing and the HTTP error mapping."""

from __future__ import annotations

import email.utils
import time

import pytest
from google.rpc import error_details_pb2

from agent_gateway.llm import RAW_ARGUMENTS_KEY, parse_tool_arguments
from agent_gateway.llm.network.remote import (
    MAX_DETAIL_CHARS,
    Endpoint,
    error_detail,
    mask_secret,
)
from agent_gateway.llm.network.retries import MAX_RETRY_AFTER_S, retry_after
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    ResourceExhausted,
    StelloError,
    Unavailable,
    to_rpc_status,
)
from tests.gateway.llm.network.support import logged

ENDPOINT = Endpoint("openai", "http://llm:8000/v1", "m", 30.0, 2, secret="sk-secret-1234")


class TestParseToolArguments:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            pytest.param('{"q": "x"}', {"q": "x"}, id="object"),
            pytest.param("", {}, id="empty"),
            pytest.param("  ", {}, id="blank"),
            pytest.param('{"q": ', {RAW_ARGUMENTS_KEY: '{"q": '}, id="truncated"),
            pytest.param("[1, 2]", {RAW_ARGUMENTS_KEY: "[1, 2]"}, id="array"),
            pytest.param("null", {RAW_ARGUMENTS_KEY: "null"}, id="null"),
        ],
    )
    def test_parse(self, text: str, expected: dict[str, object]) -> None:
        """A JSON object decodes; blank is {}; anything else is kept raw under the raw key."""
        assert parse_tool_arguments(text, tool="t") == expected


class TestErrorDetail:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            pytest.param({"error": {"message": "m1"}}, "m1", id="nested"),
            pytest.param({"message": "m2"}, "m2", id="flat"),
            pytest.param({"error": "m3"}, "m3", id="error-string"),
            pytest.param(" plain text ", "plain text", id="text"),
            pytest.param({"other": 1}, None, id="none"),
            pytest.param(None, None, id="no-body"),
        ],
    )
    def test_detail(self, body: object, expected: str | None) -> None:
        """The human message is found in the OpenAI and Anthropic error shapes."""
        assert error_detail(body) == expected


class TestEndpoint:
    @pytest.mark.parametrize(
        ("status", "error", "reason"),
        [
            pytest.param(400, FailedPrecondition, "LLM_REQUEST_REJECTED", id="400"),
            pytest.param(401, FailedPrecondition, "LLM_API_KEY_REJECTED", id="401"),
            pytest.param(402, ResourceExhausted, "LLM_RATE_LIMITED", id="402"),
            pytest.param(403, FailedPrecondition, "LLM_API_KEY_REJECTED", id="403"),
            pytest.param(404, FailedPrecondition, "LLM_MODEL_NOT_FOUND", id="404"),
            pytest.param(408, Unavailable, "LLM_UNAVAILABLE", id="408"),
            pytest.param(413, FailedPrecondition, "LLM_REQUEST_REJECTED", id="413"),
            pytest.param(422, FailedPrecondition, "LLM_REQUEST_REJECTED", id="422"),
            pytest.param(429, ResourceExhausted, "LLM_RATE_LIMITED", id="429"),
            pytest.param(500, Unavailable, "LLM_UNAVAILABLE", id="500"),
            pytest.param(529, Unavailable, "LLM_UNAVAILABLE", id="529"),
        ],
    )
    def test_status_mapping(
        self,
        status: int,
        error: type[StelloError],
        reason: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Each HTTP status maps to its domain error and reason with the status only, and says
        what to do: retry later, or (a refusal, which a retry meets again) that the gateway's
        operator must act; the provider, server, model and the provider's text are logged
        under the error id. A refusal said only what happened ("the LLM provider rejected
        the request")."""
        mapped = ENDPOINT.status_error(status, "why")
        assert type(mapped) is error
        todo = "operator" if error is FailedPrecondition else "retry later"
        assert todo in mapped.message, mapped.message
        assert mapped.reason == reason
        assert mapped.metadata == {"http_status": str(status)}
        assert "why" not in mapped.message and "llm:8000" not in mapped.message
        line = logged(caplog, mapped)
        assert f"HTTP {status}: why" in line and "openai at http://llm:8000/v1, model m" in line

    def test_retries_named_only_when_retried(self, caplog: pytest.LogCaptureFixture) -> None:
        """A retried error logs how many retries; an error inside a stream does not, nor a
        status the SDKs never retry (explore10 F9: a 400 said "after 2 retries", sent once)."""
        assert "after 2 retries" in logged(caplog, ENDPOINT.status_error(500, None))
        assert "after 2 retries" in logged(caplog, ENDPOINT.status_error(429, None))
        assert "retries" not in logged(caplog, ENDPOINT.status_error(500, None, retried=False))
        for refusal in (400, 401, 404, 422):
            assert "retries" not in logged(caplog, ENDPOINT.status_error(refusal, None))

    def test_retry_after_goes_with_a_rate_limit_or_an_outage_only(self) -> None:
        """The provider's Retry-After is told to the client (RetryInfo) for the failures a
        retry can mend, not for a refusal."""
        assert ENDPOINT.status_error(429, None, retry_after_s=3.0).retry_after_s == 3.0
        assert ENDPOINT.status_error(503, None, retry_after_s=3.0).retry_after_s == 3.0
        assert ENDPOINT.status_error(400, None, retry_after_s=3.0).retry_after_s is None
        status = to_rpc_status(ENDPOINT.status_error(429, None, retry_after_s=1.5))
        [info] = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
        unpacked = error_details_pb2.RetryInfo()
        info.Unpack(unpacked)
        assert unpacked.retry_delay.ToNanoseconds() == 1_500_000_000


class TestRetryAfter:
    @pytest.mark.parametrize(
        ("headers", "seconds"),
        [
            ({"retry-after": "7"}, 7.0),
            ({"retry-after": "0.5"}, 0.5),
            ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
            ({"retry-after": "100000"}, MAX_RETRY_AFTER_S),
            ({"retry-after": "0"}, None),
            ({"retry-after": "-3"}, None),
            ({"retry-after": "nan"}, None),
            ({"retry-after": "soon"}, None),
            ({}, None),
            (None, None),
        ],
    )
    def test_seconds(self, headers: dict[str, str] | None, seconds: float | None) -> None:
        assert retry_after(headers) == seconds

    def test_an_http_date(self) -> None:
        later = email.utils.formatdate(time.time() + 30, usegmt=True)
        waited = retry_after({"retry-after": later})
        assert waited is not None and 28 <= waited <= 31

    def test_redacts_key_and_cuts_detail(self, caplog: pytest.LogCaptureFixture) -> None:
        """A provider message echoing the key is masked and cut to a readable length."""
        mapped = ENDPOINT.status_error(401, "bad key sk-secret-1234 " + "x" * 2000)
        line = logged(caplog, mapped)
        assert "sk-secret-1234" not in line and "sk-secret-1234" not in mapped.message
        assert "bad key *** " in line
        assert len(line) < MAX_DETAIL_CHARS + 300

    def test_timeout_and_connection(self, caplog: pytest.LogCaptureFixture) -> None:
        """A timeout is DEADLINE_EXCEEDED, no connection UNAVAILABLE, each plain to the client
        and logging what to check."""
        timeout = ENDPOINT.timeout_error()
        assert isinstance(timeout, DeadlineExceeded)
        assert "STELLO_" not in timeout.message
        line = logged(caplog, timeout)
        assert "within 30s" in line and "STELLO_LLM_TIMEOUT_S" in line
        down = ENDPOINT.connection_error("connection refused")
        assert isinstance(down, Unavailable)
        assert "STELLO_" not in down.message
        assert "STELLO_OPENAI_BASE_URL" in logged(caplog, down)

    def test_key_not_in_repr(self) -> None:
        """An endpoint's repr never shows the key."""
        assert "sk-secret-1234" not in repr(ENDPOINT)


class TestMaskSecret:
    KEY = "sk-proj-AbCdEfGh12345678IjKlMnOp"

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            pytest.param(f"key {KEY} end", "key *** end", id="whole"),
            pytest.param(f"key {KEY[5:13]}!", "key ***!", id="eight-chars"),
            pytest.param(f"a {KEY[3:20]} b {KEY[-9:]}", "a *** b ***", id="two-pieces"),
            pytest.param(f"short {KEY[5:12]} stays", f"short {KEY[5:12]} stays", id="seven-chars"),
            pytest.param("nothing here", "nothing here", id="none"),
        ],
    )
    def test_pieces_of_eight_or_more_are_masked(self, text: str, expected: str) -> None:
        """Every run covered by a piece of the key of 8+ characters becomes ***; shorter
        pieces stay (they are too common to mean the key)."""
        assert mask_secret(text, self.KEY) == expected

    def test_short_and_missing_keys(self) -> None:
        """A key under 8 characters is masked whole; no key masks nothing."""
        assert mask_secret("x abc123 y", "abc123") == "x *** y"
        assert mask_secret("x abc123 y", None) == "x abc123 y"
