"""What a client and the log are told when the LLM provider fails a turn (DESIGN §7).

Real providers (the openai and anthropic SDKs) against the loopback fake servers,
behind a real gateway. The fake's error text echoes pieces of the API key, the
model and the base URL, as real providers do. The client gets the status, the
reason and a plain sentence with an error id: no base URL, model, setting name
or provider text. The gateway's log carries the details under that error id,
with every 8-character piece of the key masked.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from agent_gateway.llm.network.error_bodies import ERROR_BODY_LIMIT
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from tests.gateway.conftest import StackMaker, rpc_error
from tests.gateway.llm.network.support import NETWORK, fake_server, network_provider
from tests.gateway.turns_support import send, stream_events
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import FakeToolCall, Reply
from tests.support.fake_openai import FakeOpenAI, chunk

pytestmark = pytest.mark.sql

KEY = "sk-live-Q7pWz3RkT9vLm2XcB8nY4hJd6FgA1sE5"
MODEL = "secret-model-x1"
PIECES = [KEY[i : i + 8] for i in range(len(KEY) - 7)]
"""Every 8-character piece of the key: none may reach a client or the log."""
ERROR_ID = re.compile(r"error id ([0-9a-f]{16})")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A fake provider server and the real provider that talks to it."""

    name: str
    fake: FakeOpenAI | FakeAnthropic
    provider: Callable[[str], OpenAIProvider | AnthropicProvider]


@pytest.fixture(name="endpoint", params=NETWORK)
async def _endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Endpoint]:
    name = request.param
    async with fake_server(name) as fake:
        yield Endpoint(
            name,
            fake,
            lambda url: network_provider(
                name, url, model=MODEL, api_key=KEY, timeout_s=5.0, max_retries=0
            ),
        )


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The ErrorInfo detail of an RPC error."""
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    raise AssertionError("no ErrorInfo")


def assert_plain(text: str, base_url: str) -> None:
    """`text` names no base URL, model, setting or piece of the key."""
    assert base_url not in text and "127.0.0.1" not in text
    assert MODEL not in text and "STELLO_" not in text
    leaked = [piece for piece in PIECES if piece in text]
    assert not leaked, f"key pieces {leaked} in {text!r}"


class TestProviderErrors:
    @pytest.mark.parametrize(
        ("status", "code", "reason"),
        [
            pytest.param(401, "FAILED_PRECONDITION", "LLM_API_KEY_REJECTED", id="401"),
            pytest.param(404, "FAILED_PRECONDITION", "LLM_MODEL_NOT_FOUND", id="404"),
            pytest.param(400, "FAILED_PRECONDITION", "LLM_REQUEST_REJECTED", id="400"),
            pytest.param(429, "RESOURCE_EXHAUSTED", "LLM_RATE_LIMITED", id="429"),
            pytest.param(503, "UNAVAILABLE", "LLM_UNAVAILABLE", id="503"),
        ],
    )
    async def test_the_client_gets_a_plain_reason_and_the_log_the_details(
        self,
        make_stack: StackMaker,
        endpoint: Endpoint,
        caplog: pytest.LogCaptureFixture,
        status: int,
        code: str,
        reason: str,
    ) -> None:
        """An HTTP error echoing key pieces, model and URL reaches the client as its status,
        reason and a sentence with an error id only; the log line of that id holds the
        provider's text, model and base URL, with the key pieces masked."""
        fake, url = endpoint.fake, endpoint.fake.base_url
        fake.fail(
            status,
            f"Incorrect key {KEY[3:19]} (ends {KEY[-9:]}) for model {MODEL} at {url}",
        )
        async with endpoint.provider(url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            with caplog.at_level(logging.WARNING):
                error = await rpc_error(send(stack, root.id, "hi"))
        assert (error.code().name, error_info(error).reason) == (code, reason)
        details = error.details() or ""
        assert_plain(details, url)
        assert set(error_info(error).metadata) <= {"http_status"}
        found = ERROR_ID.search(details)
        assert found is not None, details
        logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
        assert len(logged) == 1
        assert MODEL in logged[0] and url in logged[0] and f"HTTP {status}" in logged[0]
        assert "Incorrect key ***" in logged[0]
        everything = "\n".join(r.getMessage() for r in caplog.records)
        assert not [piece for piece in PIECES if piece in everything]

    async def test_an_unreachable_provider_is_plain_too(
        self, make_stack: StackMaker, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A base URL nobody listens on is UNAVAILABLE with an error id, naming neither the
        URL nor the setting to the client; the log names both."""
        async with type(endpoint.fake)() as gone:
            url = gone.base_url
        async with endpoint.provider(url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            with caplog.at_level(logging.WARNING):
                error = await rpc_error(send(stack, root.id, "hi"))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        details = error.details() or ""
        assert_plain(details, url)
        found = ERROR_ID.search(details)
        assert found is not None, details
        logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
        assert len(logged) == 1 and url in logged[0] and "_BASE_URL" in logged[0]


def not_found(endpoint: Endpoint, case: str) -> Reply:
    """A 404 of `case` from a server asked for a path it does not serve: a web server's page,
    FastAPI's (vLLM's) ``{"detail": "Not Found"}``, the provider's own JSON error (which
    names the path, not the model), or no body at all."""
    if case == "html":
        return Reply.text("<html><body><h1>404 Not Found</h1></body></html>", status=404)
    if case == "fastapi":
        return Reply.json({"detail": "Not Found"}, status=404)
    if case == "empty":
        return Reply(status=404)
    assert case == "provider"
    if endpoint.name == "openai":
        message = "Invalid URL (POST /chat/completions)"
        return Reply.json(
            {"error": {"message": message, "type": "invalid_request_error"}}, status=404
        )
    error = {"type": "not_found_error", "message": "Not Found"}
    return Reply.json({"type": "error", "error": error}, status=404)


def wrong_path(endpoint: Endpoint) -> str:
    """A base URL whose path is wrong: OpenAI's without its ``/v1``; Anthropic's with one
    (its SDK adds ``/v1/messages``)."""
    return endpoint.fake.url if endpoint.name == "openai" else f"{endpoint.fake.url}/v1"


class TestWrongBaseUrl:
    @pytest.mark.parametrize("case", ["html", "fastapi", "provider", "empty"])
    async def test_a_404_naming_no_model_says_the_path_is_likely_wrong(
        self,
        make_stack: StackMaker,
        endpoint: Endpoint,
        caplog: pytest.LogCaptureFixture,
        case: str,
    ) -> None:
        """A 404 that does not name the configured model (a base URL whose path is wrong) is
        FAILED_PRECONDITION LLM_MODEL_NOT_FOUND saying the base URL's path is likely wrong,
        naming neither the URL nor the setting; the log names both and the path asked for.
        It was told as an unknown model. A 404 naming the model is still told as one."""
        fake, url = endpoint.fake, wrong_path(endpoint)
        async with endpoint.provider(url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            fake.push(not_found(endpoint, case))
            with caplog.at_level(logging.WARNING):
                error = await rpc_error(send(stack, root.id, "hi"))
            assert fake.requests[-1].path in ("/chat/completions", "/v1/v1/messages")
            assert (error.code().name, error_info(error).reason) == (
                "FAILED_PRECONDITION",
                "LLM_MODEL_NOT_FOUND",
            )
            details = error.details() or ""
            assert "base URL" in details and "path is likely wrong" in details, details
            assert "operator" in details and "model" not in details
            assert_plain(details, url)
            found = ERROR_ID.search(details)
            assert found is not None, details
            logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
            assert len(logged) == 1 and url in logged[0] and "HTTP 404" in logged[0]
            assert f"STELLO_{endpoint.name.upper()}_BASE_URL" in logged[0]
            assert "_MODEL" not in logged[0]
            fake.fail(404, f"The model `{MODEL}` does not exist")
            error = await rpc_error(send(stack, root.id, "hi"))
            assert "does not know the configured model" in (error.details() or "")


def not_json_event(endpoint: Endpoint) -> Reply:
    """A stream whose first event shows some text and whose second is not JSON."""
    if endpoint.name == "openai":
        return Reply.sse([(None, chunk({"content": "par"})), (None, '{"choices": [')])
    block = {"type": "text", "text": "par"}
    start = {"type": "content_block_start", "index": 0, "content_block": block}
    return Reply.sse([("content_block_start", start), ("content_block_delta", '{"type": "con')])


def script(endpoint: Endpoint, case: str) -> None:
    """Queue the provider's answer of `case` on `endpoint`'s fake server."""
    fake = endpoint.fake
    if case == "html":
        fake.push(Reply.text("<html><h1>502 Bad Gateway</h1><p>nginx</p></html>"))
    elif case == "broken-json":
        fake.push(Reply.text('{"id": "x", "cho', content_type="application/json"))
    elif case == "cut-short":
        fake.cut_short("this reply ends early", FakeToolCall("clock", {"tz": "UTC"}, id="tr1"))
    elif case == "event-not-json":
        fake.push(not_json_event(endpoint))
    else:
        assert case == "no-event"
        fake.push(Reply.sse([]))


class TestUnreadableAnswers:
    @pytest.mark.parametrize(
        ("case", "streamed"),
        [
            pytest.param("html", False, id="html-send"),
            pytest.param("html", True, id="html-stream"),
            pytest.param("broken-json", False, id="broken-json-send"),
            pytest.param("broken-json", True, id="broken-json-stream"),
            pytest.param("cut-short", True, id="cut-short-stream"),
            pytest.param("event-not-json", True, id="event-not-json-stream"),
            pytest.param("no-event", True, id="no-event-stream"),
        ],
    )
    async def test_unreadable_answer_stores_nothing(
        self,
        make_stack: StackMaker,
        endpoint: Endpoint,
        caplog: pytest.LogCaptureFixture,
        case: str,
        streamed: bool,
    ) -> None:
        """An HTTP 200 that does not follow the protocol (a proxy's page, broken JSON, a stream
        cut short without its end marker or with an event that is not JSON, a stream with no
        event) is UNAVAILABLE LLM_UNAVAILABLE with an error id, logged without a traceback;
        nothing is stored and the next turn works."""
        fake, url = endpoint.fake, endpoint.fake.base_url
        async with endpoint.provider(url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            fake.reply("first answer")
            await send(stack, root.id, "first")
            before = await stack.records(root.id)
            script(endpoint, case)
            turn = stream_events if streamed else send
            with caplog.at_level(logging.WARNING):
                error = await rpc_error(turn(stack, root.id, "second"))
            assert (error.code().name, error_info(error).reason) == (
                "UNAVAILABLE",
                "LLM_UNAVAILABLE",
            )
            details = error.details() or ""
            assert "could not be read" in details
            assert_plain(details, url)
            found = ERROR_ID.search(details)
            assert found is not None, details
            logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
            assert len(logged) == 1 and "unreadable answer" in logged[0]
            assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
            assert await stack.records(root.id) == before
            fake.reply("second answer")
            reply = await send(stack, root.id, "second")
            assert reply.assistant.content == "second answer"
            assert len(await stack.records(root.id)) == len(before) + 2


class TestStreamsThatBreakOff:
    async def test_a_reset_mid_answer_stores_nothing(
        self, make_stack: StackMaker, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A connection reset after SendStream showed part of the answer is UNAVAILABLE
        LLM_UNAVAILABLE "the answer broke off" with an error id; nothing is stored and the
        turn sent again works. It was told "the LLM provider cannot be reached", and the
        log sent the operator to the base URL setting."""
        fake, url = endpoint.fake, endpoint.fake.base_url
        async with endpoint.provider(url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            fake.reply("first answer")
            await send(stack, root.id, "first")
            before = await stack.records(root.id)
            fake.drop_mid_answer("half of an answer", events=4)
            with caplog.at_level(logging.WARNING):
                error = await rpc_error(stream_events(stack, root.id, "second"))
            assert (error.code().name, error_info(error).reason) == (
                "UNAVAILABLE",
                "LLM_UNAVAILABLE",
            )
            details = error.details() or ""
            assert "broke off" in details and "retry later" in details
            assert_plain(details, url)
            found = ERROR_ID.search(details)
            assert found is not None, details
            logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
            assert len(logged) == 1 and "mid-answer" in logged[0]
            assert "_BASE_URL" not in logged[0]
            assert await stack.records(root.id) == before
            fake.reply("second answer")
            reply = await send(stack, root.id, "second")
            assert reply.assistant.content == "second answer"


class TestEndlessErrorBodies:
    async def test_the_client_gets_the_answers_status(
        self, make_stack: StackMaker, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An HTTP 400 whose body goes on past the gateway's bound and never ends is read
        no further (`llm.error_bodies`): Send is FAILED_PRECONDITION LLM_REQUEST_REJECTED,
        the log saying the body was cut; nothing stored. The SDKs read it whole: the call
        waited the provider's timeout and the client got DEADLINE_EXCEEDED."""
        pieces = ERROR_BODY_LIMIT // (64 * 1024) + 2
        endless = Reply(
            status=400,
            headers=(("content-type", "text/plain"),),
            chunks=(b"x" * 64 * 1024,) * (pieces + 1),
        ).hung_after(pieces)
        endpoint.fake.push(endless)
        async with endpoint.provider(endpoint.fake.base_url) as provider:
            stack = await make_stack(provider)
            root = await stack.root()
            with caplog.at_level(logging.WARNING):
                error = await rpc_error(send(stack, root.id, "hi"))
            assert (error.code().name, error_info(error).reason) == (
                "FAILED_PRECONDITION",
                "LLM_REQUEST_REJECTED",
            )
            found = ERROR_ID.search(error.details() or "")
            assert found is not None, error.details()
            logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
            assert len(logged) == 1 and "[the body was cut at" in logged[0], logged
            assert not [r for r in await stack.records(root.id) if r.content == "hi"]
