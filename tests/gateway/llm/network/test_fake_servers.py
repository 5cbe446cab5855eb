"""The fake LLM servers themselves: scripting, defaults and recording, as later tests rely on."""

from __future__ import annotations

import asyncio

import pytest

from agent_gateway.llm import LLMMessage
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.errors import Unavailable
from tests.gateway.llm.network.support import MODEL, logged
from tests.support.fake_http import FakeAnswer
from tests.support.fake_openai import FakeOpenAI

HI = [LLMMessage("user", "hi")]


class TestFakeOpenAI:
    async def test_unscripted_request_fails_loudly(self, caplog: pytest.LogCaptureFixture) -> None:
        """A request nothing was scripted for gets a 501 that says so (in the log), without
        retries."""
        async with FakeOpenAI() as fake, OpenAIProvider(model=MODEL, base_url=fake.base_url) as p:
            with pytest.raises(Unavailable) as caught:
                await p.complete(HI)
            assert "no scripted reply for POST /v1/chat" in logged(caplog, caught.value)
            assert len(fake.requests) == 1

    async def test_default_answers_from_the_request(self) -> None:
        """`set_default` answers every unscripted call from the request body; scripts go first."""
        async with FakeOpenAI() as fake, OpenAIProvider(model=MODEL, base_url=fake.base_url) as p:
            fake.set_default(lambda body: FakeAnswer(f"seen {len(body['messages'])}"))
            fake.reply("scripted")
            assert (await p.complete(HI)).content == "scripted"
            assert (await p.complete(HI * 2)).content == "seen 2"
            assert fake.pending == 0
            assert len(fake.chat_bodies()) == 2

    async def test_clear(self) -> None:
        """`clear` forgets the script and the recorded requests."""
        async with FakeOpenAI() as fake, OpenAIProvider(model=MODEL, base_url=fake.base_url) as p:
            fake.reply("a")
            await p.complete(HI)
            fake.reply("b")
            fake.clear()
            assert (fake.pending, fake.requests) == (0, [])

    @pytest.mark.parametrize("body", [b"", b"not json"])
    async def test_unreadable_body_answers_400(self, body: bytes) -> None:
        """A body the fake cannot read is answered 400 (as a real provider does), not dropped
        with an exception in the event loop (the autouse `loop_errors` fixture would see it)."""
        async with FakeOpenAI() as fake:
            fake.set_default(lambda body: FakeAnswer("never"))
            reader, writer = await asyncio.open_connection("127.0.0.1", fake.port)
            head = f"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {len(body)}\r\n"
            writer.write(head.encode() + b"connection: close\r\n\r\n" + body)
            answer = await reader.read()
            writer.close()
            await writer.wait_closed()
            assert answer.startswith(b"HTTP/1.1 400 ")
            assert b"could not read the body of POST /v1/chat/completions" in answer
            assert [r.body for r in fake.rejected] == [body]

    @pytest.mark.parametrize(
        "opening",
        [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"garbage\r\n\r\n"],
        ids=["http2-preface", "garbage"],
    )
    async def test_a_client_that_is_not_http1_is_hung_up_on(self, opening: bytes) -> None:
        """A stray client (a gRPC channel reconnecting to a port this fake now holds) gets
        the connection closed, nothing recorded, nothing raised in the event loop."""
        async with FakeOpenAI() as fake:
            fake.set_default(lambda body: FakeAnswer("never"))
            reader, writer = await asyncio.open_connection("127.0.0.1", fake.port)
            writer.write(opening)
            assert await reader.read() == b""
            writer.close()
            await writer.wait_closed()
            assert (fake.requests, fake.rejected) == ([], [])

    async def test_a_slow_reply_sees_its_client_hang_up(self) -> None:
        """A reply waiting its `delay_s` ends unwritten when the client closes the
        connection meanwhile (`FakeHTTPServer.written`), as a server notices a client that
        gave up; it was written once the delay passed."""
        async with FakeOpenAI() as fake:
            fake.stall(30.0)
            _, writer = await asyncio.open_connection("127.0.0.1", fake.port)
            body = b'{"model": "m", "messages": []}'
            head = f"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {len(body)}\r\n\r\n"
            writer.write(head.encode() + body)
            writer.close()
            await writer.wait_closed()
            assert not await fake.written_whole(0)
            assert len(fake.requests) == 1
