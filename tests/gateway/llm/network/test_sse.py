"""The providers read a stream's server-sent events themselves (`sse.Parser`), not through
the SDKs' private decoders: the parser alone, and the providers' streams against the
loopback fake servers with the SDKs' decoders refusing to be used."""

from __future__ import annotations

import ast
import importlib
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import openai
import pytest

from agent_gateway.llm import TextDelta, ToolCallEvent, collect
from agent_gateway.llm.network.sse import Event, Parser
from stello.errors import ResourceExhausted, Unavailable
from tests.gateway.llm.network.support import (
    HI,
    NETWORK,
    SEARCH,
    Remote,
    logged,
    remote,
)
from tests.support.fake_http import FakeAnswer, FakeToolCall, RecordedRequest, Reply
from tests.support.fake_openai import FakeOpenAI

STREAM = b'event: a\ndata: {"x": 1}\n\n: a comment\nid: 7\nretry: 30\ndata: one\ndata:  two\n\n'
"""Two events: one named, one of two data lines (the second keeps one of its two spaces)."""
EVENTS = [Event('{"x": 1}', "a"), Event("one\n two")]
PRIVATE_STREAMING = ("openai._streaming", "anthropic._streaming")
"""The SDKs' private modules of stream decoding."""


def fed(*pieces: bytes) -> list[Event]:
    """The events a parser reads of `pieces`, fed one by one."""
    parser = Parser()
    return [event for piece in pieces for event in parser.feed(piece)]


class TestParser:
    def test_reads_fields_and_dispatches_at_a_blank_line(self) -> None:
        assert fed(STREAM) == EVENTS

    def test_reads_the_same_events_whatever_the_pieces(self) -> None:
        """Pieces cut anywhere, a CRLF cut between two of them included."""
        crlf = STREAM.replace(b"\n", b"\r\n")
        assert fed(*(crlf[i : i + 1] for i in range(len(crlf)))) == EVENTS
        assert fed(crlf[:5], crlf[5:31], crlf[31:]) == EVENTS

    def test_a_cr_alone_ends_a_line(self) -> None:
        assert fed(STREAM.replace(b"\n", b"\r")) == EVENTS

    def test_an_event_with_no_data_is_not_dispatched(self) -> None:
        assert fed(b"retry: 3000\n\nid: 7\n\ndata:\n\nevent: ping\n\n: keep-alive\n\n") == []

    def test_an_event_cut_by_the_end_is_not_dispatched(self) -> None:
        assert fed(b"data: whole\n\ndata: cut") == [Event("whole")]

    def test_pending_counts_the_event_being_read(self) -> None:
        """What the reader bounds: the bytes since the last blank line, the unended line too."""
        parser = Parser()
        parser.feed(b"data: a\n\ndata: bc\ndata: de")
        assert parser.pending == len(b"data: bc\ndata: de")
        parser.feed(b"\n\n")
        assert parser.pending == 0

    def test_bytes_that_are_not_utf8_are_replaced(self) -> None:
        assert fed(b"data: a\xffb\n\n") == [Event("a\ufffdb")]


@pytest.fixture(name="sdk_decoders_refused")
def _sdk_decoders_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both SDKs' private stream decoding raises if used: an SDK version that renamed it."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the SDK's private stream decoding was used")

    for name in PRIVATE_STREAMING:
        decoder = sdk_decoder(name)
        if decoder is not None:  # an SDK release without it has nothing to refuse
            monkeypatch.setattr(decoder, "aiter_bytes", refused)
    for client in (openai.AsyncOpenAI, anthropic.AsyncAnthropic):
        monkeypatch.setattr(client, "_make_sse_decoder", refused, raising=False)


def sdk_decoder(module: str) -> type | None:
    """The SSE decoder of the SDK's private `module`; None when there is none."""
    try:
        found = getattr(importlib.import_module(module), "SSEDecoder", None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


@pytest.fixture(name="remote", params=NETWORK)
async def _remote(request: pytest.FixtureRequest) -> AsyncIterator[Remote]:
    """A fake server and a provider talking to it (a small record limit, no retry)."""
    async with remote(request.param, max_retries=0, record_bytes=1024) as made:
        yield made


@pytest.mark.usefixtures("sdk_decoders_refused")
class TestStreamsWithoutTheSdksPrivateDecoders:
    async def test_an_answer_is_read_whole(self, remote: Remote) -> None:
        call = FakeToolCall("search", {"q": "x"}, id="call_1")
        remote.fake.reply("hello there", tool_calls=[call], prompt_tokens=7)
        events = [event async for event in remote.provider.stream(HI, tools=[SEARCH])]
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
        assert text == "hello there"
        assert [(c.id, c.name, c.arguments) for c in calls] == [("call_1", "search", {"q": "x"})]

    async def test_a_proxy_page_is_unreadable(self, remote: Remote) -> None:
        remote.fake.push(Reply.text("<html>sign in</html>"))
        with pytest.raises(Unavailable):
            await collect(remote.provider.stream(HI))

    async def test_an_endless_event_is_too_large(self, remote: Remote) -> None:
        remote.fake.push(Reply(chunks=(b"data: " + b"x" * 70_000, b"y" * 70_000)))
        with pytest.raises(ResourceExhausted):
            await collect(remote.provider.stream(HI))

    async def test_an_error_in_the_stream_is_its_error(
        self, remote: Remote, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An error event after a first piece (vLLM's, Anthropic's overloaded_error)."""
        fake = remote.fake
        if isinstance(fake, FakeOpenAI):
            fake.fail_in_answer({"message": "busy", "type": "server_error", "code": 503})
        else:
            fake.stream_error("overloaded_error", "busy", text="par")
        with pytest.raises(Unavailable) as caught:
            await collect(remote.provider.stream(HI))
        assert "error in an answer of HTTP 200" in logged(caplog, caught.value)
        assert logged(caplog, caught.value).endswith("busy); check the provider's status")


class TestTheEndOfAnOpenAIStream:
    """After a stream's ``[DONE]``, what is left of it is read (as the SDK read it), so that
    its connection takes the next call; for a short while only."""

    async def test_its_connection_takes_the_next_call(self) -> None:
        async with remote("openai") as made:
            fake = made.fake
            assert isinstance(fake, FakeOpenAI)
            for text in ("one", "two", "three"):
                fake.reply_unfinished(text)  # no finish_reason: [DONE] ends each answer
                done = await collect(made.provider.stream(HI))
                assert done.content == text
            assert fake.connections == 1

    async def test_a_stream_left_open_after_it_is_whole(self) -> None:
        """A server that sends nothing more after [DONE] and keeps the stream open: the answer
        is whole (not a wait for its next piece, DEADLINE_EXCEEDED)."""
        async with remote("openai", timeout_s=5.0) as made:
            fake = made.fake
            assert isinstance(fake, FakeOpenAI)

            def left_open(request: RecordedRequest) -> Reply:
                reply = fake.render(FakeAnswer("kept"), request, finish_reason=False)
                return reply.hung_after(len(reply.chunks or ()))

            fake.push(left_open)
            assert (await collect(made.provider.stream(HI))).content == "kept"


def our_modules() -> list[Path]:
    """The source files of the project's own packages (not its tests)."""
    root = Path(__file__).resolve().parents[4]
    return [
        path
        for package in root.iterdir()
        if (package / "__init__.py").is_file() and package.name != "tests"
        for path in package.rglob("*.py")
    ]


def private_uses(path: Path) -> list[str]:
    """What `path` takes of the SDKs' private stream decoding: imports of their
    ``_streaming`` modules, definitions of ``_make_sse_decoder``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in PRIVATE_STREAMING:
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in PRIVATE_STREAMING]
        elif isinstance(node, ast.FunctionDef) and node.name == "_make_sse_decoder":
            found.append("def _make_sse_decoder")
    return found


def test_no_module_of_ours_uses_the_sdks_private_stream_decoding() -> None:
    modules = our_modules()
    assert any(p.name == "openai_provider.py" for p in modules)
    used = {str(p): private_uses(p) for p in modules if private_uses(p)}
    assert used == {}
