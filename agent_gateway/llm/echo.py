"""The offline, deterministic `echo` provider (DESIGN §6).

It lets the tool loop, compression and consolidation run with no network:

- the last message is a user message of `/tool NAME {json}` commands (one or
  more, the JSON object optional): it calls those tools, with content '';
- the context ends with tool messages: it answers
  ``tool results: NAME: CONTENT; NAME (error): CONTENT`` in call order;
- otherwise: ``echo: <last user message>``.

Answers are cut to `max_reply_chars` (and to the call's `max_tokens`, four
characters a token), so echoing a compression or
consolidation transcript yields a bounded summary. Tool-call ids are a hash of
the whole context and the call's position: the same context always gives the
same ids. `tools` is ignored: echo calls whatever tool the command names.
Usage counts ceil(len/4) tokens per message (spec §4.7).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncGenerator, Sequence

from agent_gateway.llm.base import (
    Completion,
    Done,
    FinishReason,
    JsonObject,
    LLMMessage,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
    Usage,
    estimate_tokens,
)
from stello.formats import json_text

DEFAULT_MAX_CONTEXT_TOKENS = 128_000
DEFAULT_MAX_REPLY_CHARS = 2_000

_COMMAND = re.compile(r"/tool\s+([^\s{]+)")


def parse_tool_commands(text: str) -> list[tuple[str, JsonObject]] | None:
    """The `(name, arguments)` of each `/tool NAME {json}` command in `text`.

    Returns None unless `text` consists only of such commands (whitespace
    between them is free; a missing JSON object means `{}`).
    """
    text = text.strip()
    pos, end = 0, len(text)
    calls: list[tuple[str, JsonObject]] = []
    while pos < end:
        match = _COMMAND.match(text, pos)
        if match is None:
            return None
        pos = _skip_space(text, match.end())
        arguments: JsonObject = {}
        if pos < end and text[pos] == "{":
            try:
                value, pos = json_text.raw_decode(text, pos)
            except ValueError:  # not JSON, NaN or infinite numbers, nested past what we read
                return None
            arguments = value
            pos = _skip_space(text, pos)
        calls.append((match.group(1), arguments))
    return calls or None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


class EchoProvider:
    """Answers from the context alone: deterministic, offline, instant (unless `delay_s`)."""

    name = "echo"

    def __init__(
        self,
        *,
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
        max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS,
        delay_s: float = 0.0,
        stream_chunks: int = 3,
    ) -> None:
        """Configure the echo.

        Args:
            max_context_tokens: the context window it reports (compression starts at 80%).
            max_reply_chars: answers are cut to this many characters.
            delay_s: seconds to wait before answering; a stream waits this long
                before each text delta.
            stream_chunks: a streamed answer arrives in at most this many deltas.
        """
        if max_context_tokens < 1:
            raise ValueError("max_context_tokens must be at least 1")
        if max_reply_chars < 1:
            raise ValueError("max_reply_chars must be at least 1")
        if stream_chunks < 1:
            raise ValueError("stream_chunks must be at least 1")
        self._max_context_tokens = max_context_tokens
        self._max_reply_chars = max_reply_chars
        self._delay_s = delay_s
        self._stream_chunks = stream_chunks

    @property
    def max_context_tokens(self) -> int:
        """The context window it reports, in tokens."""
        return self._max_context_tokens

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer `messages` at once (see the module docstring for what it says)."""
        if self._delay_s > 0:
            await asyncio.sleep(self._delay_s)
        return self.answer(messages, max_tokens=max_tokens)

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Answer `messages` as a few text deltas, then the tool calls, then `Done`."""
        completion = self.answer(messages, max_tokens=max_tokens)
        text = completion.content
        size = -(-len(text) // self._stream_chunks)
        for start in range(0, len(text), max(size, 1)):
            if self._delay_s > 0:
                await asyncio.sleep(self._delay_s)
            yield TextDelta(text[start : start + size])
        for call in completion.tool_calls:
            yield ToolCallEvent(call)
        yield Done(completion)

    def answer(
        self, messages: Sequence[LLMMessage], *, max_tokens: int | None = None
    ) -> Completion:
        """The completion for `messages`, computed synchronously (at most `max_tokens` of
        its own estimate, ceil(len/4))."""
        calls: tuple[ToolCallSpec, ...] = ()
        if messages and messages[-1].role == "tool":
            content = _tool_results_summary(messages)
        else:
            text = _last_user_text(messages)
            commands = parse_tool_commands(text)
            if commands is None:
                content = f"echo: {text}"
            else:
                content = ""
                calls = _tool_calls(messages, commands)
        limit = (
            self._max_reply_chars
            if max_tokens is None
            else min(self._max_reply_chars, max_tokens * 4)
        )
        content = content[:limit]
        prompt_tokens = sum(estimate_tokens(m.content) for m in messages)
        completion_tokens = estimate_tokens(content) + sum(
            estimate_tokens(c.name + c.arguments_json()) for c in calls
        )
        usage = Usage(prompt_tokens, completion_tokens, prompt_tokens + completion_tokens)
        finish: FinishReason = "tool_calls" if calls else "stop"
        return Completion(content=content, tool_calls=calls, usage=usage, finish_reason=finish)


def _last_user_text(messages: Sequence[LLMMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return message.content
    return ""


def _tool_calls(
    messages: Sequence[LLMMessage], commands: list[tuple[str, JsonObject]]
) -> tuple[ToolCallSpec, ...]:
    context = json.dumps(
        [[m.role, m.content, m.tool_call_id, [c.id for c in m.tool_calls]] for m in messages],
        ensure_ascii=False,
    )
    digest = hashlib.sha256(context.encode()).hexdigest()
    return tuple(
        ToolCallSpec(
            id="call_" + hashlib.sha256(f"{digest}:{i}:{name}".encode()).hexdigest()[:24],
            name=name,
            arguments=arguments,
        )
        for i, (name, arguments) in enumerate(commands)
    )


def _tool_results_summary(messages: Sequence[LLMMessage]) -> str:
    first = len(messages)
    while first > 0 and messages[first - 1].role == "tool":
        first -= 1
    names: dict[str, str] = {}
    for message in messages[:first]:
        names.update((call.id, call.name) for call in message.tool_calls)
    parts = []
    for result in messages[first:]:
        name = names.get(result.tool_call_id or "", "unknown_tool")
        label = f"{name} (error)" if result.is_error else name
        parts.append(f"{label}: {result.content}")
    return "tool results: " + "; ".join(parts)
