"""The `anthropic` provider: Anthropic's Messages API through the official SDK (DESIGN §6).

Mapping a context to the Messages API:

- every system message, wherever it stands, goes into the ``system``
  parameter, in order, joined by a blank line (the system prompt, the session
  identity, the insight, a compression summary);
- user text is a ``text`` block; assistant text a ``text`` block followed by
  one ``tool_use`` block per tool call; a tool message is a ``tool_result``
  block (``is_error`` kept) in a user message;
- consecutive messages of one role are merged into one message, as the API
  requires (tool results of one round form one user message; a user message
  right after them joins it);
- blank text is not sent (the API refuses empty text blocks), and a message
  left with no block is dropped.

Tools go out as ``{name, description, input_schema}``. Streaming reads the
server-sent events (message_start, content_block_start/delta/stop with
``text_delta`` and ``input_json_delta``, message_delta, message_stop; an event of
any other type is skipped, and one without its ``event:`` line is named by its data's
``type``, `anthropic_answers`): text is yielded as it comes, a
tool call once its block stops. Usage: prompt tokens
are the input tokens plus cache reads and writes, completion tokens the
output tokens. Errors map as `remote` describes, including the ``error``
events a stream may carry (an ``overloaded_error`` is UNAVAILABLE).

Tool-call ids are made unique within an answer (`answers.unique_ids`); a
``tool_use.input`` that is not an object is kept raw, as streamed arguments that
are not one are (`tool_arguments.parse_tool_arguments`). An answer that does not follow
the protocol is UNAVAILABLE (`Endpoint.unreadable_answer`): a body that is not a
Message (an HTML page from a proxy, JSON that does not parse), an event that is not
JSON, and a stream that ends before the answer's end (neither a ``message_delta``
with its ``stop_reason`` nor ``message_stop``: a connection closed cleanly
mid-answer; half an answer is not stored as a whole one), or that holds no event at
all (a proxy's page: its start is logged). A body of HTTP 200 that is an error
object (a proxy's; streamed or not) is the error its type says. An answer cut at
max_tokens (``stop_reason: max_tokens``) is kept and logged; the completion carries
why the answer ended (`base.FinishReason`: ``refusal`` is a content filter's stop).

An answer is read up to a bound derived from the record limit (``record_bytes``,
`answers.AnswerBound`), streamed (its text and arguments, and each event) or not (its
body). The provider reads both itself, the answer opened through the SDK's public
``with_streaming_response`` (a stream's events with `sse.Parser`, not the SDK's decoder):
past it, the connection is closed and the call is RESOURCE_EXHAUSTED
LLM_ANSWER_TOO_LARGE. A body that broke off once it began is not retried, as a stream
is not.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Literal, TypeAlias

import anthropic
import httpx2
from anthropic.types import (
    Message,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from agent_gateway.llm.base import (
    Completion,
    Done,
    JsonObject,
    LLMMessage,
    StreamEvent,
    ToolCallEvent,
    ToolSpec,
)
from agent_gateway.llm.network.answers import (
    RECORD_BYTES,
    AnswerBound,
    finish_of,
    log_stop,
)
from agent_gateway.llm.network.anthropic_answers import (
    NoEvent,
    StreamedMessage,
    StreamError,
    read_events,
    read_message,
)
from agent_gateway.llm.network.error_bodies import cut_detail, http_hooks
from agent_gateway.llm.network.remote import (
    Endpoint,
    error_detail,
)
from agent_gateway.llm.network.retries import retries_made, retry_after
from agent_gateway.llm.network.sdk import Body, Request, SdkProvider, sdk_retries, tls_context
from stello.errors import StelloError

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_CONTEXT_TOKENS = 200_000
DEFAULT_MAX_TOKENS = 8192

EMPTY_SCHEMA: JsonObject = {"type": "object", "properties": {}}

# The HTTP status an error event inside a stream stands for (the stream itself answered 200).
_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}

Block: TypeAlias = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam


def to_anthropic_request(messages: Sequence[LLMMessage]) -> tuple[str, list[MessageParam]]:
    """The ``system`` text and the ``messages`` of a Messages request for `messages`."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[tuple[Literal["user", "assistant"], list[Block]]] = []
    for message in messages:
        if message.role == "system":
            continue
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    out: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            out.append({"role": "user", "content": blocks})
        else:
            out.append({"role": "assistant", "content": blocks})
    return system, out


def _blocks(message: LLMMessage) -> list[Block]:
    if message.role == "tool":
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "is_error": message.is_error,
        }
        if message.content:
            result["content"] = message.content
        return [result]
    blocks: list[Block] = []
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        use: ToolUseBlockParam = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.arguments,
        }
        blocks.append(use)
    return blocks


def to_anthropic_tools(tools: Sequence[ToolSpec] | None) -> list[ToolParam]:
    """`tools` as Messages API tools ([] for none)."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters or EMPTY_SCHEMA,
        }
        for tool in tools or ()
    ]


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic]):
    """Anthropic's Messages API, through the official SDK."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
        record_bytes: int = RECORD_BYTES,
    ) -> None:
        """Configure the client (no connection is made until the first call).

        Args:
            model: the model name sent with every request.
            api_key: the API key (sent as ``x-api-key``).
            base_url: the API root (None: Anthropic's).
            max_tokens: most tokens one answer may have.
            timeout_s: longest wait to connect or for the next piece of an answer (at
                most what is left of the caller's deadline, `deadlines.attempt_timeout`).
            max_retries: retries of a call that failed with 408/409/429/5xx, a
                timeout or no connection.
            max_context_tokens: the model's context window, in tokens.
            record_bytes: the most bytes a record holds (STELLO_MAX_RECORD_BYTES): a
                streamed answer is read up to `answers.answer_limit` of it.
        """
        if max_context_tokens < 1:
            raise ValueError("max_context_tokens must be at least 1")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        base_url = base_url or DEFAULT_BASE_URL
        self._max_context_tokens = max_context_tokens
        self._max_tokens = max_tokens
        self._endpoint = Endpoint(
            "anthropic", base_url, model, timeout_s, max_retries, secret=api_key
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,  # the retries are ours (`retries.Retries`)
            http_client=anthropic.DefaultAsyncHttpxClient(
                verify=tls_context(), event_hooks=http_hooks()
            ),
        )
        self._retries = sdk_retries(
            self._endpoint, anthropic.APIStatusError, anthropic.APIConnectionError
        )
        self._record_bytes = record_bytes

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer `messages` with one non-streaming Messages call."""
        system, wire = to_anthropic_request(messages)
        offered = to_anthropic_tools(tools) or anthropic.omit
        limit = self._limit(max_tokens)
        began = False
        try:
            async with AsyncExitStack() as stack:
                request = self._request(system, wire, offered, limit)
                answered = await self._opened(stack, request)
                began = True  # from here on, nothing is retried
                response = await self._whole(answered, Message)
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise self._translate(exc, mid_answer=began) from exc
        self._refuse_error(response)
        completion = self._endpoint.read_as(
            response, Message, "the body", "a Message", read_message
        )
        log_stop(self.name, getattr(response, "stop_reason", None), limit)
        return completion

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Answer `messages` as text deltas and tool calls as their blocks end, then `Done`."""
        system, wire = to_anthropic_request(messages)
        offered = to_anthropic_tools(tools) or anthropic.omit
        limit = self._limit(max_tokens)
        answer = StreamedMessage(bound=AnswerBound(self.name, self._record_bytes))
        began = False
        try:
            async with AsyncExitStack() as stack:
                request = self._request(system, wire, offered, limit, stream=True)
                answered = await self._opened(stack, request)
                began = True  # from here on, nothing is retried
                async for event in read_events(answered.iter_bytes(), answer.bound):
                    out = self._read_event(answer, event)
                    if out is not None:
                        yield out
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise self._translate(exc, mid_answer=began) from exc
        except (json.JSONDecodeError, RecursionError) as exc:
            # An event whose data is not JSON, or nests past what json reads.
            raise self._endpoint.unreadable_answer(
                f"a server-sent event is not JSON ({exc})"
            ) from exc
        if not answer.stopped:
            raise self._endpoint.unreadable_answer(
                "the stream ended without message_delta or message_stop (closed mid-answer)"
            )
        log_stop(self.name, answer.stop_reason, limit)
        for call in answer.unclosed():  # blocks the server never closed before the end
            yield ToolCallEvent(call)
        yield Done(
            Completion(
                "".join(answer.text),
                tuple(answer.calls),
                answer.usage.total(),
                finish_of(answer.stop_reason),
            )
        )

    def _request(
        self,
        system: str,
        wire: list[MessageParam],
        offered: list[ToolParam] | anthropic.Omit,
        limit: int,
        *,
        stream: bool = False,
    ) -> Request:
        """The call's request (`stream`: a streamed one)."""
        streamed: Literal[True] | anthropic.Omit = True if stream else anthropic.omit

        def request(headers: dict[str, str], timeout_s: float) -> AbstractAsyncContextManager[Body]:
            return self._client.messages.with_streaming_response.create(
                model=self._endpoint.model,
                max_tokens=limit,
                messages=wire,
                system=system or anthropic.omit,
                tools=offered,
                stream=streamed,
                extra_headers=headers,
                timeout=timeout_s,
            )

        return request

    def _read_event(self, answer: StreamedMessage, event: object) -> StreamEvent | None:
        """Fold one streamed event into `answer`; the text delta or tool call it completes."""
        if isinstance(event, NoEvent):
            raise self._endpoint.unreadable_answer(event.detail)
        if isinstance(event, StreamError):
            raise self._error_object(event.body)
        try:
            return answer.add(event)
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._endpoint.unreadable_answer(
                f"a {type(event).__name__} of unexpected shape ({exc})"
            ) from exc

    def _refuse_error(self, response: object) -> None:
        """Raise the error a body of HTTP 200 that is an error object (a proxy's) stands for,
        by its type, not retried."""
        if not isinstance(response, Message) or str(response.type) != "error":
            return
        raise self._error_object({"error": (response.model_extra or {}).get("error")})

    def _error_object(self, body: object) -> StelloError:
        """The error an error object of an answer of HTTP 200 (a stream's ``error`` event, a
        proxy's body) stands for, by its type, not retried."""
        error = body.get("error") if isinstance(body, dict) else body
        kind = error.get("type") if isinstance(error, dict) else None
        status = _STATUS_OF_ERROR_TYPE.get(str(kind), 500)
        detail = error_detail(body) or repr(error)[:200]
        return self._endpoint.status_error(status, detail, retried=False)

    def _limit(self, max_tokens: int | None) -> int:
        """The call's max_tokens: the configured one, or the caller's when that is lower."""
        return self._max_tokens if max_tokens is None else max(1, min(max_tokens, self._max_tokens))

    def _translate(
        self, exc: anthropic.AnthropicError | httpx2.HTTPError, *, mid_answer: bool = False
    ) -> StelloError:
        """The domain error for an SDK or transport failure (`mid_answer`: while a stream
        that had begun was read)."""
        unanswered = self._unanswered(
            exc, anthropic.APITimeoutError, anthropic.APIConnectionError, mid_answer=mid_answer
        )
        if unanswered is not None:
            return unanswered
        endpoint = self._endpoint
        if isinstance(exc, anthropic.APIStatusError):
            detail = exc.api_message or error_detail(exc.body)
            return endpoint.status_error(
                exc.status_code,
                cut_detail(exc.response, detail),
                retry_after_s=retry_after(exc.response.headers),
                retries_made=retries_made(exc.response),
            )
        if isinstance(exc, anthropic.APIError):
            detail = error_detail(exc.body) or exc.message
            return endpoint.status_error(500, detail, retried=False)
        return endpoint.status_error(500, str(exc))
