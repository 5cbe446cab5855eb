"""The `openai` provider: any OpenAI-compatible chat completions endpoint (DESIGN §6).

It speaks through the official `openai` SDK to OpenAI itself or to any server
with the same API (vLLM, Ollama, LM Studio, ...), at the configured base URL.

Messages map one to one: system, user, assistant (with its `tool_calls`, as
function calls whose arguments are JSON text) and tool (with `tool_call_id`).
The chat completions API has no error flag on a tool result, so a failed
tool's content goes out prefixed with ``"Error: "``. Tools go out as
``{"type": "function", "function": {name, description, parameters}}``; a
tool without a schema is sent the empty object schema.

Streaming uses server-sent events with ``stream_options.include_usage``;
tool-call deltas are assembled by their index and emitted, in index order,
once the stream ends. A refusal is answered as text. A call the server sent
without an id gets ``tool_<i>``
(its position), one without a name ``unknown_tool``. Arguments that are not a
JSON object are kept raw (see `remote.parse_tool_arguments`). A server that
reports no usage gives zero usage.

Errors map as `remote` describes; the SDK retries 408/409/429/5xx, timeouts
and connection errors `max_retries` times before they surface.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

import httpx2
import openai
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from agent_gateway.llm.base import (
    Completion,
    Done,
    JsonObject,
    LLMMessage,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
    Usage,
)
from agent_gateway.llm.remote import (
    Endpoint,
    SdkProvider,
    error_detail,
    parse_tool_arguments,
    retry_after,
)
from stello.errors import StelloError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_CONTEXT_TOKENS = 128_000
NO_KEY = "no-key"
"""The key sent to a compatible server that needs none (the SDK always sends one)."""

EMPTY_SCHEMA: JsonObject = {"type": "object", "properties": {}}


class OpenAIProvider(SdkProvider[openai.AsyncOpenAI]):
    """An OpenAI-compatible chat completions endpoint, through the official SDK."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
    ) -> None:
        """Configure the client (no connection is made until the first call).

        Args:
            model: the model name sent with every request.
            api_key: the bearer key; None sends a placeholder, for local servers.
            base_url: the API root, e.g. ``http://localhost:11434/v1``
                (None: OpenAI's).
            timeout_s: longest wait to connect or for the next piece of an answer.
            max_retries: retries of a call that failed with 408/409/429/5xx, a
                timeout or no connection.
            max_context_tokens: the model's context window, in tokens.
        """
        if max_context_tokens < 1:
            raise ValueError("max_context_tokens must be at least 1")
        base_url = base_url or DEFAULT_BASE_URL
        self._max_context_tokens = max_context_tokens
        self._endpoint = Endpoint("openai", base_url, model, timeout_s, max_retries, secret=api_key)
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer `messages` with one non-streaming chat completion."""
        try:
            response = await self._client.chat.completions.create(
                model=self._endpoint.model,
                messages=to_openai_messages(messages),
                tools=to_openai_tools(tools) or openai.omit,
                max_tokens=openai.omit if max_tokens is None else max_tokens,
            )
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise self._translate(exc) from exc
        usage = _usage(response.usage)
        if not response.choices:
            return Completion(content="", usage=usage)
        message = response.choices[0].message
        calls: list[ToolCallSpec] = []
        for i, call in enumerate(message.tool_calls or ()):
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call: never offered
                continue
            name = function.name or "unknown_tool"
            calls.append(
                ToolCallSpec(
                    id=call.id or f"tool_{i}",
                    name=name,
                    arguments=parse_tool_arguments(function.arguments or "", tool=name),
                )
            )
        content = message.content or message.refusal or ""
        return Completion(content=content, tool_calls=tuple(calls), usage=usage)

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Answer `messages` as streamed text deltas, then the tool calls, then `Done`."""
        text: list[str] = []
        calls = _ToolCallAssembler()
        usage = Usage()
        try:
            response = await self._client.chat.completions.create(
                model=self._endpoint.model,
                messages=to_openai_messages(messages),
                tools=to_openai_tools(tools) or openai.omit,
                max_tokens=openai.omit if max_tokens is None else max_tokens,
                stream=True,
                stream_options={"include_usage": True},
            )
            async with response:
                async for chunk in response:
                    if chunk.usage is not None:
                        usage = _usage(chunk.usage)
                    for choice in chunk.choices:
                        if choice.index != 0:
                            continue
                        delta = choice.delta
                        for call in delta.tool_calls or ():
                            calls.add(call)
                        piece = delta.content or delta.refusal
                        if piece:
                            text.append(piece)
                            yield TextDelta(piece)
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise self._translate(exc) from exc
        finished = calls.finish()
        for spec in finished:
            yield ToolCallEvent(spec)
        yield Done(Completion(content="".join(text), tool_calls=finished, usage=usage))

    def _translate(self, exc: openai.OpenAIError | httpx2.HTTPError) -> StelloError:
        """The domain error for an SDK or transport failure."""
        unanswered = self._unanswered(exc, openai.APITimeoutError, openai.APIConnectionError)
        if unanswered is not None:
            return unanswered
        endpoint = self._endpoint
        if isinstance(exc, openai.APIStatusError):
            return endpoint.status_error(
                exc.status_code,
                error_detail(exc.body) or exc.message,
                retry_after_s=retry_after(exc.response.headers),
            )
        if isinstance(exc, openai.APIError):
            # An error event inside a stream: no status code, only its type.
            status = 429 if exc.type in ("rate_limit_exceeded", "insufficient_quota") else 500
            detail = error_detail(exc.body) or exc.message
            return endpoint.status_error(status, detail, retried=False)
        return endpoint.status_error(500, str(exc))


def to_openai_messages(messages: Sequence[LLMMessage]) -> list[ChatCompletionMessageParam]:
    """`messages` in the chat completions wire form (see the module docstring)."""
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message.role == "system":
            out.append({"role": "system", "content": message.content})
        elif message.role == "user":
            out.append({"role": "user", "content": message.content})
        elif message.role == "assistant":
            if not message.tool_calls:
                out.append({"role": "assistant", "content": message.content})
                continue
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call in message.tool_calls
            ]
            out.append(
                {"role": "assistant", "content": message.content or None, "tool_calls": calls}
            )
        else:
            content = f"Error: {message.content}" if message.is_error else message.content
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content}
            )
    return out


def to_openai_tools(tools: Sequence[ToolSpec] | None) -> list[ChatCompletionFunctionToolParam]:
    """`tools` as function tools ([] for none)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters or EMPTY_SCHEMA,
            },
        }
        for tool in tools or ()
    ]


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    return Usage(prompt, completion, usage.total_tokens or prompt + completion)


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolCallAssembler:
    """Builds whole tool calls from streamed deltas, keyed by their index."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, delta: ChoiceDeltaToolCall) -> None:
        """Fold one delta into the call at its index."""
        index = getattr(delta, "index", None)
        if not isinstance(index, int):
            # Some compatible servers omit the index: a new id opens a new call.
            known = [i for i, c in self._calls.items() if delta.id and c.id == delta.id]
            if known:
                index = known[0]
            elif delta.id or not self._calls:
                index = len(self._calls)
            else:
                index = max(self._calls)
        call = self._calls.setdefault(index, _PartialCall())
        if delta.id and not call.id:
            call.id = delta.id
        function = delta.function
        if function is not None:
            if function.name and not call.name:
                call.name = function.name
            if function.arguments:
                call.arguments.append(function.arguments)

    def finish(self) -> tuple[ToolCallSpec, ...]:
        """The assembled calls, in index order."""
        specs = []
        for position, index in enumerate(sorted(self._calls)):
            call = self._calls[index]
            name = call.name or "unknown_tool"
            specs.append(
                ToolCallSpec(
                    id=call.id or f"tool_{position}",
                    name=name,
                    arguments=parse_tool_arguments("".join(call.arguments), tool=name),
                )
            )
        return tuple(specs)
