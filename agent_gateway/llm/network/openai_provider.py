"""The `openai` provider: any OpenAI-compatible chat completions endpoint (DESIGN §6).

It speaks through the official `openai` SDK to OpenAI itself or to any server
with the same API (vLLM, Ollama, LM Studio, ...), at the configured base URL.

Messages map one to one: system, user, assistant (with its `tool_calls`, as
function calls whose arguments are JSON text) and tool (with `tool_call_id`).
The chat completions API has no error flag on a tool result, so a failed
tool's content goes out prefixed with ``"Error: "``. Tools go out as
``{"type": "function", "function": {name, description, parameters}}``; a
tool without a schema is sent the empty object schema.

An answer is capped at the configured `max_tokens` (``STELLO_OPENAI_MAX_TOKENS``,
default 16,384: gpt-4o-mini's and gpt-4o's output limit; a larger cap is refused
with HTTP 400), or at the caller's when that is lower, and the cap goes out as
``max_tokens`` or, for OpenAI's reasoning models that refuse that parameter, as
``max_completion_tokens`` (``STELLO_OPENAI_MAX_TOKENS_PARAM``). A call without a
max_tokens of its own sends none.

Streaming uses server-sent events with ``stream_options.include_usage``;
tool-call deltas are assembled by their index and emitted, in index order,
once the stream ends; a whole call followed, at its index, by a delta with
another id and a name is two calls (Ollama streams parallel calls all at
index 0, `openai_answers`). A refusal is answered as text. A call the server sent
without an id gets ``tool_<i>``
(its position), one without a name ``unknown_tool``; ids are made unique within
the answer (`answers.unique_ids`). Arguments that are not a
JSON object are kept raw (see `tool_arguments.parse_tool_arguments`); arguments sent
as a JSON object rather than as JSON text (Hugging Face TGI) are read as text is. A server that
reports no usage gives zero usage.

Errors map as `remote` describes; 408/409/429/5xx, timeouts
and connection errors are retried `max_retries` times before they surface (`retries`: the
gateway's own loop, the SDK's client retries nothing). An error object
where the answer should be (a body of HTTP 200, an event of a stream) is the
error its type or its HTTP status code says (`openai_answers.status_of_error`). An answer that
does not follow the protocol is UNAVAILABLE (`Endpoint.unreadable_answer`): a
body that is not a chat completion (an HTML page from a proxy, JSON that does not
parse), a server-sent event that is not a chunk, a streamed call answered with no event
at all (a proxy's page; its start is logged, and an error object there is the
error it says, `openai_answers.read_chunks`), and a stream that ends without
the answer's ``finish_reason`` (a connection closed cleanly mid-answer: half an
answer is not stored as a whole one) — but for a ``data: [DONE]`` after whole
content, which some compatible servers send instead of any finish_reason
(`openai_answers`: it ends the answer). An answer cut at max_tokens
(``finish_reason: length``) is kept and logged; the completion carries why the
answer ended (`base.FinishReason`: a content filter's stop told apart).

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

import httpx2
import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionStreamOptionsParam,
)

from agent_gateway.llm.base import (
    Completion,
    Done,
    JsonObject,
    LLMMessage,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
)
from agent_gateway.llm.network.answers import (
    NO_EVENT,
    RECORD_BYTES,
    AnswerBound,
    finish_of,
    log_stop,
)
from agent_gateway.llm.network.error_bodies import cut_detail, http_hooks
from agent_gateway.llm.network.openai_answers import (
    StreamedAnswer,
    error_in,
    read_chunks,
    read_completion,
    status_of_error,
)
from agent_gateway.llm.network.remote import (
    Endpoint,
    error_detail,
)
from agent_gateway.llm.network.retries import retries_made, retry_after
from agent_gateway.llm.network.sdk import Body, Request, SdkProvider, sdk_retries, tls_context
from stello.errors import StelloError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_CONTEXT_TOKENS = 128_000
DEFAULT_MAX_TOKENS = 16_384
"""Most tokens one answer may have: gpt-4o-mini's and gpt-4o's documented output limit."""

MaxTokensParam: TypeAlias = Literal["max_tokens", "max_completion_tokens"]
"""The request parameter that carries the cap (o-series reasoning models refuse max_tokens)."""
NO_KEY = "no-key"
"""The key sent to a compatible server that needs none (the SDK always sends one)."""

EMPTY_SCHEMA: JsonObject = {"type": "object", "properties": {}}


def _unfinished(answer: StreamedAnswer) -> str:
    """Why a stream's answer is not whole (for the log)."""
    if answer.done:
        return "the stream's [DONE] came without a finish_reason after a tool call cut short"
    return "the stream ended without the answer's finish_reason (closed mid-answer)"


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
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_tokens_param: MaxTokensParam = "max_tokens",
        record_bytes: int = RECORD_BYTES,
    ) -> None:
        """Configure the client (no connection is made until the first call).

        Args:
            model: the model name sent with every request.
            api_key: the bearer key; None sends a placeholder, for local servers.
            base_url: the API root, e.g. ``http://localhost:11434/v1``
                (None: OpenAI's).
            timeout_s: longest wait to connect or for the next piece of an answer (at
                most what is left of the caller's deadline, `deadlines.attempt_timeout`).
            max_retries: retries of a call that failed with 408/409/429/5xx, a
                timeout or no connection.
            max_context_tokens: the model's context window, in tokens.
            max_tokens: most tokens one answer may have (the model's output limit).
            max_tokens_param: the request parameter that carries the cap.
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
        self._max_tokens_param = max_tokens_param
        self._endpoint = Endpoint("openai", base_url, model, timeout_s, max_retries, secret=api_key)
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,  # the retries are ours (`retries.Retries`)
            http_client=openai.DefaultAsyncHttpxClient(
                verify=tls_context(), event_hooks=http_hooks()
            ),
        )
        self._retries = sdk_retries(
            self._endpoint, openai.APIStatusError, openai.APIConnectionError
        )
        self._record_bytes = record_bytes

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer `messages` with one non-streaming chat completion."""
        wire = to_openai_messages(messages)
        offered = to_openai_tools(tools) or openai.omit
        cap = self._cap(max_tokens)
        began = False
        try:
            async with AsyncExitStack() as stack:
                answered = await self._opened(stack, self._request(wire, offered, cap))
                began = True  # from here on, nothing is retried
                response = await self._whole(answered, ChatCompletion)
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise self._translate(exc, mid_answer=began) from exc
        self._refuse_error(response)
        completion, finish_reason = self._endpoint.read_as(
            response, ChatCompletion, "the body", "a chat completion", read_completion
        )
        log_stop(self.name, finish_reason, cap)
        return completion

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Answer `messages` as streamed text deltas, then the tool calls, then `Done`."""
        wire = to_openai_messages(messages)
        offered = to_openai_tools(tools) or openai.omit
        cap = self._cap(max_tokens)
        answer = StreamedAnswer(bound=AnswerBound(self.name, self._record_bytes))
        began = False
        try:
            async with AsyncExitStack() as stack:
                request = self._request(wire, offered, cap, stream=True)
                answered = await self._opened(stack, request)
                began = True  # from here on, nothing is retried
                async for chunk in read_chunks(answered.iter_bytes(), answer.bound):
                    piece = self._read_chunk(answer, chunk)
                    if piece:
                        yield TextDelta(piece)
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise self._translate(exc, mid_answer=began) from exc
        except (json.JSONDecodeError, RecursionError) as exc:
            # A `data:` line that is not JSON, or nests past what json reads.
            raise self._endpoint.unreadable_answer(
                f"a server-sent event is not JSON ({exc})"
            ) from exc
        finish = answer.finish()
        if finish is None:
            raise self._endpoint.unreadable_answer(_unfinished(answer))
        log_stop(self.name, finish, cap)
        finished = answer.calls.finish()
        for spec in finished:
            yield ToolCallEvent(spec)
        yield Done(
            Completion(
                content="".join(answer.text),
                tool_calls=finished,
                usage=answer.usage,
                finish_reason=finish_of(finish),
            )
        )

    def _request(
        self,
        wire: list[ChatCompletionMessageParam],
        offered: list[ChatCompletionFunctionToolParam] | openai.Omit,
        cap: int | None,
        *,
        stream: bool = False,
    ) -> Request:
        """The call's request (`stream`: a streamed one, its usage included)."""
        limit, completion_limit = self._limits(cap)
        streamed: Literal[True] | openai.Omit = True if stream else openai.omit
        usage: ChatCompletionStreamOptionsParam | openai.Omit = (
            {"include_usage": True} if stream else openai.omit
        )

        def request(headers: dict[str, str], timeout_s: float) -> AbstractAsyncContextManager[Body]:
            return self._client.chat.completions.with_streaming_response.create(
                model=self._endpoint.model,
                messages=wire,
                tools=offered,
                max_tokens=limit,
                max_completion_tokens=completion_limit,
                stream=streamed,
                stream_options=usage,
                extra_headers=headers,
                timeout=timeout_s,
            )

        return request

    def _cap(self, max_tokens: int | None) -> int | None:
        """The call's cap: the caller's, at most the configured one (None when the caller
        gives none)."""
        return None if max_tokens is None else max(1, min(max_tokens, self._max_tokens))

    def _limits(self, cap: int | None) -> tuple[int | openai.Omit, int | openai.Omit]:
        """The call's ``max_tokens`` and ``max_completion_tokens``: `cap` under the configured
        name, the other omitted (both when there is no cap)."""
        if cap is None:
            return openai.omit, openai.omit
        if self._max_tokens_param == "max_completion_tokens":
            return openai.omit, cap
        return cap, openai.omit

    def _read_chunk(self, answer: StreamedAnswer, chunk: object) -> str:
        """Fold one streamed chunk into `answer`; its text ('' for none)."""
        self._refuse_error(chunk)
        if isinstance(chunk, ChatCompletionChunk) and chunk.object == NO_EVENT:
            detail = (chunk.model_extra or {}).get("detail")
            raise self._endpoint.unreadable_answer(str(detail))
        return self._endpoint.read_as(
            chunk, ChatCompletionChunk, "a server-sent event", "a chat completion chunk", answer.add
        )

    def _refuse_error(self, answer: object) -> None:
        """Raise the error an error object in an answer of HTTP 200 stands for
        (`openai_answers.error_in`), not retried."""
        error = (
            error_in(answer) if isinstance(answer, ChatCompletion | ChatCompletionChunk) else None
        )
        if error is not None:
            status = status_of_error(error.get("type"), error.get("code"))
            raise self._endpoint.status_error(
                status, error_detail({"error": error}) or repr(error)[:200], retried=False
            )

    def _translate(
        self, exc: openai.OpenAIError | httpx2.HTTPError, *, mid_answer: bool = False
    ) -> StelloError:
        """The domain error for an SDK or transport failure (`mid_answer`: while a stream
        that had begun was read)."""
        unanswered = self._unanswered(
            exc, openai.APITimeoutError, openai.APIConnectionError, mid_answer=mid_answer
        )
        if unanswered is not None:
            return unanswered
        endpoint = self._endpoint
        if isinstance(exc, openai.APIStatusError):
            return endpoint.status_error(
                exc.status_code,
                cut_detail(exc.response, error_detail(exc.body) or exc.message),
                retry_after_s=retry_after(exc.response.headers),
                retries_made=retries_made(exc.response),
            )
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
