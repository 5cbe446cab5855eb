"""The offline echo provider (DESIGN §6): plain, streamed, `/tool` commands, deterministic."""

from __future__ import annotations

import asyncio

import pytest

from agent_gateway.llm import (
    Done,
    EchoProvider,
    LLMMessage,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    Usage,
    collect,
    parse_tool_commands,
)


def user(text: str) -> list[LLMMessage]:
    return [LLMMessage("system", "prompt"), LLMMessage("user", text)]


class TestParseToolCommands:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            pytest.param('/tool search {"q": "x"}', [("search", {"q": "x"})], id="with-args"),
            pytest.param("/tool ping", [("ping", {})], id="no-args"),
            pytest.param('  /tool a {"n": 1}\n/tool b  ', [("a", {"n": 1}), ("b", {})], id="two"),
            pytest.param('/tool a{"n":{"m":[1,2]}}', [("a", {"n": {"m": [1, 2]}})], id="nested"),
            pytest.param('/tool a {\n "n": 1\n}', [("a", {"n": 1})], id="multiline-json"),
        ],
    )
    def test_commands(self, text: str, expected: list[tuple[str, dict[str, object]]]) -> None:
        """Text made only of `/tool NAME {json}` commands parses into those calls."""
        assert parse_tool_commands(text) == expected

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param("hello", id="plain"),
            pytest.param("", id="empty"),
            pytest.param("/tool", id="no-name"),
            pytest.param("/tool a {bad json}", id="bad-json"),
            # Python's json raised RecursionError here, and read NaN and 1e999 (inf).
            pytest.param('/tool a {"x":' + "[" * 999 + "]" * 999 + "}", id="nested-999-deep"),
            pytest.param('/tool a {"x": NaN}', id="nan"),
            pytest.param('/tool a {"x": -Infinity}', id="infinity"),
            pytest.param('/tool a {"x": 1e999}', id="beyond-a-double"),
            pytest.param("/tool a hello", id="trailing-text"),
            pytest.param("please /tool a", id="leading-text"),
            pytest.param("/toolx a", id="no-space"),
        ],
    )
    def test_not_commands(self, text: str) -> None:
        """Anything else is not a tool command."""
        assert parse_tool_commands(text) is None


class TestEchoProvider:
    async def test_echoes_last_user_message(self) -> None:
        """A plain message comes back prefixed with 'echo: '."""
        completion = await EchoProvider().complete(user("你好"))
        assert completion.content == "echo: 你好"
        assert completion.tool_calls == ()

    async def test_usage_is_token_estimate(self) -> None:
        """Usage counts ceil(len/4) per prompt message and for the answer."""
        completion = await EchoProvider().complete(user("hello"))
        # "prompt" = 2, "hello" = 2; "echo: hello" (11 chars) = 3.
        assert completion.usage == Usage(4, 3, 7)

    async def test_tool_command_becomes_call(self) -> None:
        """`/tool NAME {json}` turns into that tool call with empty content."""
        completion = await EchoProvider().complete(user('/tool search {"q": "test"}'))
        assert completion.content == ""
        [call] = completion.tool_calls
        assert (call.name, call.arguments) == ("search", {"q": "test"})
        assert call.id.startswith("call_")

    async def test_several_tool_commands(self) -> None:
        """Several commands give several calls, in order, with distinct ids."""
        completion = await EchoProvider().complete(user("/tool a {}\n/tool b {}"))
        assert [c.name for c in completion.tool_calls] == ["a", "b"]
        assert len({c.id for c in completion.tool_calls}) == 2

    async def test_deterministic(self) -> None:
        """The same context gives the same answer and ids, even from another instance."""
        messages = user('/tool search {"q": 1}')
        first = await EchoProvider().complete(messages)
        second = await EchoProvider(max_context_tokens=10).complete(messages)
        assert first == second

    async def test_ids_differ_with_context(self) -> None:
        """The same command in a different context gets a different id."""
        one = await EchoProvider().complete(user("/tool a"))
        two = await EchoProvider().complete([LLMMessage("user", "x"), *user("/tool a")])
        assert one.tool_calls[0].id != two.tool_calls[0].id

    async def test_summarises_tool_results(self) -> None:
        """After tool messages it summarises the results, naming each tool and marking errors."""
        messages = [
            LLMMessage("user", "go"),
            LLMMessage(
                "assistant", "", (ToolCallSpec("c1", "search", {}), ToolCallSpec("c2", "fetch", {}))
            ),
            LLMMessage("tool", '{"hits":3}', tool_call_id="c1"),
            LLMMessage("tool", "timeout", tool_call_id="c2", is_error=True),
        ]
        completion = await EchoProvider().complete(messages)
        assert completion.content == 'tool results: search: {"hits":3}; fetch (error): timeout'
        assert completion.tool_calls == ()

    async def test_unknown_tool_result(self) -> None:
        """A tool result whose call is not in the context is named unknown_tool."""
        completion = await EchoProvider().complete([LLMMessage("tool", "x", tool_call_id="zz")])
        assert completion.content == "tool results: unknown_tool: x"

    async def test_reply_is_capped(self) -> None:
        """Answers are cut to max_reply_chars, so echoed transcripts stay bounded."""
        completion = await EchoProvider(max_reply_chars=10).complete(user("y" * 100))
        assert completion.content == "echo: yyyy"

    async def test_max_context_tokens(self) -> None:
        """The context window is configurable."""
        assert EchoProvider(max_context_tokens=50).max_context_tokens == 50

    @pytest.mark.parametrize(
        "kwargs",
        [
            pytest.param({"max_context_tokens": 0}, id="context"),
            pytest.param({"max_reply_chars": 0}, id="reply"),
            pytest.param({"stream_chunks": 0}, id="chunks"),
        ],
    )
    def test_rejects_bad_configuration(self, kwargs: dict[str, int]) -> None:
        """Non-positive sizes are refused with a message naming the setting."""
        with pytest.raises(ValueError, match="must be at least 1"):
            EchoProvider(**kwargs)

    async def test_stream_text(self) -> None:
        """A streamed answer arrives in a few deltas that join to the text, then Done."""
        events = [e async for e in EchoProvider().stream(user("hello world"))]
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert 1 < len(deltas) <= 3
        assert "".join(deltas) == "echo: hello world"
        assert isinstance(events[-1], Done)
        assert events[-1].completion == await EchoProvider().complete(user("hello world"))

    async def test_stream_tool_calls(self) -> None:
        """A streamed tool call comes as a ToolCallEvent before Done, with no text."""
        events = [e async for e in EchoProvider().stream(user("/tool a {}"))]
        assert [type(e) for e in events] == [ToolCallEvent, Done]
        assert isinstance(events[0], ToolCallEvent)
        assert events[0].call.name == "a"

    async def test_collect(self) -> None:
        """Collecting a stream gives the same completion as complete."""
        provider = EchoProvider()
        completion = await collect(provider.stream(user("abc")))
        assert completion == await provider.complete(user("abc"))

    async def test_delay_is_cancellable(self) -> None:
        """A slow echo is cancelled by plain asyncio cancellation."""
        task = asyncio.create_task(EchoProvider(delay_s=10).complete(user("x")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_delay_before_each_delta(self) -> None:
        """A delayed stream waits before each delta, so it can be cancelled mid-answer."""
        stream = EchoProvider(delay_s=0.01).stream(user("hello world"))
        first = await anext(stream)
        assert isinstance(first, TextDelta)
        await stream.aclose()
