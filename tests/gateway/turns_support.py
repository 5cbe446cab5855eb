"""Turn-test helpers: a spying LLM provider behind the provider interface, and RPC shortcuts."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from agent_gateway.llm import (
    PRESETS,
    Completion,
    Done,
    EchoProvider,
    LLMMessage,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
    Usage,
)
from agent_gateway.llm.prompts.texts import COMPRESSOR, CONSOLIDATOR
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Stack

COMPRESSOR_PROMPTS = frozenset(texts[COMPRESSOR.name] for texts in PRESETS.values())
HELPER_PROMPTS = COMPRESSOR_PROMPTS | {texts[CONSOLIDATOR.name] for texts in PRESETS.values()}
"""The system prompts of compression and consolidation calls, in every preset."""


@dataclass(frozen=True, slots=True)
class Call:
    """One call the provider received."""

    messages: list[LLMMessage]
    tools: list[ToolSpec] | None
    streamed: bool
    max_tokens: int | None = None

    @property
    def helper(self) -> bool:
        """A compression or consolidation call (not a conversation turn)."""
        return bool(self.messages) and self.messages[0].content in HELPER_PROMPTS

    @property
    def compression(self) -> bool:
        """A compression call."""
        return bool(self.messages) and self.messages[0].content in COMPRESSOR_PROMPTS

    def pairs(self) -> list[tuple[str, str]]:
        """The messages as (role, content)."""
        return [(m.role, m.content) for m in self.messages]


Scripted = Completion | BaseException
"""A scripted answer: a completion to give, or an error to raise."""


@dataclass(slots=True)
class SpyProvider:
    """Answers like the echo provider unless scripted; records calls; can fail or wait.

    `script` answers conversation calls in order, `helper_script` compression
    and consolidation calls (`helper_error` fails them all); `gate`, when
    set, makes every call wait for it; `cancelled` counts calls cut short.
    """

    max_context_tokens: int = 1_000_000
    max_reply_chars: int = 2_000
    delay_s: float = 0.0
    stream_chunks: int = 3
    calls: list[Call] = field(default_factory=list)
    script: deque[Scripted] = field(default_factory=deque)
    helper_script: deque[Scripted] = field(default_factory=deque)
    helper_error: BaseException | None = None
    gate: asyncio.Event | None = None
    cancelled: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _echo: EchoProvider = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._echo = EchoProvider(
            max_context_tokens=self.max_context_tokens,
            max_reply_chars=self.max_reply_chars,
            stream_chunks=3,
        )

    def then(self, *answers: Scripted) -> SpyProvider:
        """Queue answers for the next conversation calls."""
        self.script.extend(answers)
        return self

    @property
    def turns(self) -> list[Call]:
        """The conversation calls (not compression or consolidation)."""
        return [c for c in self.calls if not c.helper]

    @property
    def compressions(self) -> list[Call]:
        """The compression calls."""
        return [c for c in self.calls if c.compression]

    async def _wait(self) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.gate is not None:
            await self.gate.wait()

    def then_helper(self, *answers: Scripted) -> SpyProvider:
        """Queue answers for the next compression or consolidation calls."""
        self.helper_script.extend(answers)
        return self

    def _answer(self, call: Call) -> Completion:
        if call.helper:
            if self.helper_error is not None:
                raise self.helper_error
        script = self.helper_script if call.helper else self.script
        if script:
            answer = script.popleft()
            if isinstance(answer, BaseException):
                raise answer
            return answer
        return self._echo.answer(call.messages, max_tokens=call.max_tokens)

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Record the call, wait if asked, then answer."""
        call = Call(list(messages), list(tools) if tools else None, False, max_tokens)
        self.calls.append(call)
        self.started.set()
        try:
            await self._wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self._answer(call)

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Record the call, then stream the answer in `stream_chunks` pieces (waits before each)."""
        call = Call(list(messages), list(tools) if tools else None, True, max_tokens)
        self.calls.append(call)
        self.started.set()
        try:
            completion = self._answer(call)
            text = completion.content
            size = max(-(-len(text) // self.stream_chunks), 1)
            for start in range(0, len(text), size):
                await self._wait()
                yield TextDelta(text[start : start + size])
            for tool_call in completion.tool_calls:
                yield ToolCallEvent(tool_call)
            yield Done(completion)
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise


def answer(
    text: str = "", *calls: ToolCallSpec, prompt: int = 10, completion: int = 5
) -> Completion:
    """A scripted completion with the given usage."""
    return Completion(text, tuple(calls), Usage(prompt, completion, prompt + completion))


EMPTY_ANSWERS = [
    pytest.param("", id="empty"),
    pytest.param(" \n ", id="blank"),
    pytest.param("<think>pondering</think>\n", id="think-only"),
    pytest.param("<think>pondering, then cut off by max_tokens", id="unclosed-think"),
]
"""Answers with no text once their reasoning is removed."""


def tool_call(name: str, call_id: str, **arguments: Any) -> ToolCallSpec:
    """A tool call the model makes."""
    return ToolCallSpec(call_id, name, dict(arguments))


def tool_definition(name: str, description: str = "", **schema: Any) -> common_pb2.ToolDefinition:
    """A client tool declaration."""
    definition = common_pb2.ToolDefinition(name=name, description=description)
    if schema:
        definition.parameters.update(schema)
    return definition


async def send(stack: Stack, session_id: str, content: str, **fields: Any) -> Any:
    """Send one message; answers the SendResponse."""
    return await stack.gw.Send(
        agent_pb2.SendRequest(
            space_id=stack.space.sid, session_id=session_id, content=content, **fields
        )
    )


def send_stream(stack: Stack, session_id: str, content: str, **fields: Any) -> Any:
    """Start a SendStream call (iterate it, or read() it)."""
    request = agent_pb2.SendStreamRequest(
        space_id=stack.space.sid, session_id=session_id, content=content, **fields
    )
    return stack.gw.SendStream(request, metadata=stack.space.metadata)


async def stream_events(stack: Stack, session_id: str, content: str, **fields: Any) -> list[Any]:
    """Every event of a SendStream call."""
    return [event async for event in send_stream(stack, session_id, content, **fields)]


async def submit(
    stack: Stack, session_id: str, *results: tuple[str, str] | tuple[str, str, bool], **fields: Any
) -> Any:
    """SubmitToolResults with (tool_call_id, content[, is_error]) results."""
    return await stack.gw.SubmitToolResults(
        agent_pb2.SubmitToolResultsRequest(
            space_id=stack.space.sid,
            session_id=session_id,
            results=[agent_pb2.ToolResult(**_result(r)) for r in results],
            **fields,
        )
    )


def submit_stream(
    stack: Stack, session_id: str, *results: tuple[str, str] | tuple[str, str, bool], **fields: Any
) -> Any:
    """Start a SubmitToolResultsStream call (iterate it, or read() it)."""
    request = agent_pb2.SubmitToolResultsStreamRequest(
        space_id=stack.space.sid,
        session_id=session_id,
        results=[agent_pb2.ToolResult(**_result(r)) for r in results],
        **fields,
    )
    return stack.gw.SubmitToolResultsStream(request, metadata=stack.space.metadata)


async def submit_stream_events(
    stack: Stack, session_id: str, *results: tuple[str, str] | tuple[str, str, bool], **fields: Any
) -> list[Any]:
    """Every event of a SubmitToolResultsStream call."""
    return [event async for event in submit_stream(stack, session_id, *results, **fields)]


def _result(result: tuple[str, str] | tuple[str, str, bool]) -> dict[str, Any]:
    is_error = result[2] if len(result) == 3 else False
    return {"tool_call_id": result[0], "content": result[1], "is_error": is_error}


def roles(records: Sequence[common_pb2.Record]) -> list[str]:
    """Role names of records, lower case."""
    return [
        common_pb2.RecordRole.Name(r.role).removeprefix("RECORD_ROLE_").lower() for r in records
    ]


async def insight(stack: Stack, session_id: str) -> str | None:
    """The stored insight (not consumed)."""
    view = await stack.view(session_id)
    return view.insight if view.HasField("insight") else None


async def put_insight(stack: Stack, session_id: str, content: str) -> None:
    """Put an insight through the gateway."""
    await stack.gw.PutInsight(
        agent_pb2.PutInsightRequest(
            space_id=stack.space.sid, session_id=session_id, content=content
        )
    )


async def compression_cache(stack: Stack, session_id: str) -> Any:
    """The stored compression cache, or None."""
    reply = await stack.storage.GetCompressionCache(
        storage_pb2.GetCompressionCacheRequest(space_id=stack.space.sid, session_id=session_id)
    )
    return reply.cache if reply.HasField("cache") else None


async def trim(stack: Stack, session_id: str, keep_recent: int) -> int:
    """TrimRecords through storage; answers how many went."""
    reply = await stack.storage.TrimRecords(
        storage_pb2.TrimRecordsRequest(
            space_id=stack.space.sid, session_id=session_id, keep_recent=keep_recent
        )
    )
    return int(reply.removed_count)


async def wait_for(predicate: Callable[[], Any], *, within_s: float = 30.0) -> None:
    """Poll an async or plain predicate until it is true (or fail after `within_s`: a bound
    for a hang, not a speed check; what is awaited is often a background job of several
    RPCs, on a CI machine whose two cores run three test passes)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def cancel_reached(stack: Stack, within_s: float = 10.0) -> None:
    """Until a call in flight on the stack's gateway was cancelled (its client's cancellation
    reached the handler): what a test waits for before it lets the handler go on."""
    chain = stack.gateway.app.chain
    assert chain is not None
    await wait_for(lambda: any(t.cancelling() for t in chain.in_flight), within_s=within_s)


async def calls_ended(stack: Stack, within_s: float = 30.0) -> None:
    """Until every call in flight on the stack's gateway has ended, its cleanup done (one
    its client cancelled ends once the cancellation reached its handler): what a test
    waits for before it checks what such a call left, or that it did nothing more."""
    chain = stack.gateway.app.chain
    assert chain is not None
    assert await chain.ended(within_s) == 0, "a call on the gateway never ended"


async def send_when_free(
    stack: Stack, session_id: str, content: str, *, within_s: float = 6.0
) -> Any:
    """Send once the session's lease is free; fails if it stays taken (a leak lasts its TTL,
    10 s by default: `within_s` stays under it, or a leaked lease would pass unseen).

    A call the client already gave up on (deadline, cancel) may still be
    running on the server for a moment, holding the lease.
    """
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        try:
            return await send(stack, session_id, content)
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.ABORTED:
                raise
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("the session's turn lease was never given back") from error
        await asyncio.sleep(0.02)
