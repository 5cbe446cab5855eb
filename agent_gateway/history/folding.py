"""Folding records into a summary, one bounded model call per chunk (DESIGN §4.3, §5.14).

A fold call is ``[system: prompt, user: previous summary block + transcript
header + lines]`` (`Prompts.fold_messages`); its answer, capped at the
window's summary share (max_tokens), is the next summary. Records become
``role: content`` lines, a line too long for a chunk cut to fit. Chunks are
packed from the newest line backwards (`Packer`), so when a caller may make
only a few calls the newest records are the ones folded and the older ones
are left out — counted, never silently (the lossy catch-up). Every call is
counted against the window before it is sent (`Counter`), and the provider's
report calibrates the count.

An answer that is empty once its reasoning is removed (nothing, a content
filter's blank, a reasoning model that spent max_tokens inside ``<think>``)
is a failed call, never a summary or a memory: `EmptyAnswer`, UNAVAILABLE
LLM_UNAVAILABLE as a provider failure is, so the caller stores nothing and
keeps what it had (the memory, the previous summary) — the empty text would
have erased it. An answer larger than a slot may hold (a provider that did
not keep to max_tokens) is RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE, stored
neither.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.budget import MESSAGE_OVERHEAD, Counter, Window
from agent_gateway.history.context import Record
from agent_gateway.history.records import context_record
from agent_gateway.llm import Completion, LLMMessage, LLMProvider, Prompts, Usage, strip_think
from agent_gateway.llm.prompts.texts import MEMORY_HEADER, OMITTED_RECORDS, TRANSCRIPT_HEADER
from stello.errors import FailedPrecondition, ResourceExhausted, Unavailable, new_error_id
from stello.reasons import LLM_ANSWER_TOO_LARGE, LLM_UNAVAILABLE, WINDOW_TOO_SMALL
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

Meter = Callable[[Usage], None]
"""Told the usage of each call (a background job counts its spend)."""
PAGE = 200
"""Records per ListRecords page while reading records to fold."""
CUT_MARK = " […]"
"""Ends a line or summary cut to fit a call."""


class EmptyAnswer(Unavailable):
    """Raised when a summary call's answer is empty once its reasoning is removed: nothing of
    it may be stored (reason LLM_UNAVAILABLE, as a provider failure)."""


def empty_answer(what: str, completion: Completion, max_tokens: int) -> EmptyAnswer:
    """The error of an answer to `what` that held no text; what it held is logged (never
    the text itself) under the error id the message ends with."""
    error_id = new_error_id()
    log.warning(
        "the model answered %s to %s (%d completion tokens reported, max_tokens %d): its "
        "answer was not stored, what it would have replaced is kept (error id %s)",
        held(completion.content),
        what,
        completion.usage.completion_tokens,
        max_tokens,
        error_id,
    )
    return EmptyAnswer(
        f"the model answered nothing to {what} (an empty answer, or only its reasoning); "
        f"it was not stored: retry later (error id {error_id})",
        reason=LLM_UNAVAILABLE,
    )


def too_large(what: str, size: int, slot_bytes: int) -> ResourceExhausted:
    """The error of an answer to `what` of `size` bytes, over `slot_bytes` (logged under the
    error id the message ends with)."""
    error_id = new_error_id()
    log.warning(
        "the model answered %d bytes to %s, over STELLO_MAX_SLOT_BYTES=%d: the provider did "
        "not keep to max_tokens; its answer was not stored (error id %s)",
        size,
        what,
        slot_bytes,
        error_id,
    )
    return ResourceExhausted(
        f"the model's answer to {what} is {size} bytes, over the {slot_bytes} bytes a summary "
        f"or memory may hold; it was not stored (error id {error_id})",
        reason=LLM_ANSWER_TOO_LARGE,
        metadata={"answer_bytes": str(size), "slot_bytes": str(slot_bytes)},
    )


def held(content: str) -> str:
    """What an answer with no text held, said without its text."""
    if "<think>" not in content:
        if "</think>" in content:
            return f"only reasoning ({len(content)} characters, the prompt opened its <think>)"
        return f"no text ({len(content)} blank characters)" if content else "nothing"
    closed = "</think>" in content.rsplit("<think>", 1)[1]
    how = "" if closed else ", the last never closed: cut off inside its reasoning"
    return f"only reasoning ({len(content)} characters in <think> blocks{how})"


@dataclass(frozen=True, slots=True)
class Line:
    """One record as a transcript line."""

    seq: int
    role: str
    content: str
    tokens: int


@dataclass(slots=True)
class Packer:
    """Packs lines newest first into at most `max_chunks` chunks of `capacity` tokens."""

    capacity: int
    max_chunks: int
    chunks: list[list[Line]] = field(default_factory=list)
    _used: int = 0
    full: bool = False
    """A line did not fit any more: older lines are left out."""

    def add(self, line: Line) -> bool:
        """Take `line` (older than every line taken so far); False once no chunk has room."""
        if self.full or self.max_chunks <= 0:
            self.full = True
            return False
        if self.chunks and self._used + line.tokens <= self.capacity:
            self.chunks[-1].append(line)
            self._used += line.tokens
            return True
        if len(self.chunks) >= self.max_chunks:
            self.full = True
            return False
        self.chunks.append([line])
        self._used = line.tokens
        return True

    def in_order(self) -> list[list[Line]]:
        """The chunks, oldest first, each oldest line first."""
        return [list(reversed(chunk)) for chunk in reversed(self.chunks)]

    @property
    def first_seq(self) -> int | None:
        """The seq of the oldest line taken."""
        return self.chunks[-1][-1].seq if self.chunks else None


@dataclass(slots=True)
class CallBudget:
    """How many compressor calls a turn may still make."""

    remaining: int

    def take(self) -> None:
        """Count one call."""
        self.remaining -= 1


def cut(counter: Counter, text: str, tokens: int) -> str:
    """`text`, or its longest prefix (and `CUT_MARK`) that counts at most `tokens`."""
    if counter.text(text) <= tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.text(text[:middle] + CUT_MARK) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low] + CUT_MARK


class Folder:
    """Folds lines into summaries with one provider, within its window."""

    def __init__(
        self,
        provider: LLMProvider,
        prompts: Prompts,
        counter: Counter,
        record_bytes: int,
        slot_bytes: int,
    ) -> None:
        self._provider = provider
        self._prompts = prompts
        self._counter = counter
        self._record_bytes = record_bytes
        self._slot_bytes = slot_bytes

    @property
    def window(self) -> Window:
        """The provider's window now."""
        return Window(self._provider.max_context_tokens, self._record_bytes)

    def capacity(self, prompt: str) -> int:
        """The tokens of lines one call under `prompt` may hold (a previous summary as
        large as `Window.summary_tokens` allows, and its answer, kept aside).

        Raises:
            FailedPrecondition: the window is too small for any fold.
        """
        window = self.window
        fixed = (
            self._counter.text(prompt)
            + self._counter.text(self._prompts.text(TRANSCRIPT_HEADER))
            + self._counter.text(self._prompts.text(OMITTED_RECORDS, count="9999999"))
            + self._counter.text(self._prompts.text(MEMORY_HEADER))
            + 3 * window.summary_tokens  # the previous summary (counted generously), the answer
            + 4 * MESSAGE_OVERHEAD
            + max(8, window.tokens // 32)
        )
        room = window.tokens - fixed
        if room < 32:
            raise FailedPrecondition(
                f"the model's window of {window.tokens} tokens is too small to summarise the "
                "history (the compressor's instructions and a summary take most of it); "
                "configure a model with a larger window",
                reason=WINDOW_TOO_SMALL,
            )
        return room

    def line(self, record: Record, capacity: int) -> Line:
        """The transcript line of `record`, cut to `capacity` tokens."""
        content = record.content
        tokens = self._counter.text(f"{record.role}: {content}") + 1
        if tokens > capacity:
            content = cut(self._counter, content, capacity - self._counter.text(record.role) - 2)
            tokens = self._counter.text(f"{record.role}: {content}") + 1
        return Line(record.seq, record.role, content, tokens)

    def lines(self, records: Iterable[Record], capacity: int) -> list[Line]:
        """The transcript lines of `records`."""
        return [self.line(record, capacity) for record in records]

    async def fold(
        self,
        summary: str | None,
        chunk: Sequence[Line],
        *,
        prompt: str,
        what: str,
        omitted: int = 0,
        meter: Meter | None = None,
    ) -> str:
        """One call: the summary of `summary` and `chunk` (`omitted` older records named);
        `what` names the fold in the log and errors.

        Raises:
            EmptyAnswer: the model answered nothing.
        """
        window = self.window
        if summary and self._counter.text(summary) > 2 * window.summary_tokens:
            summary = cut(self._counter, summary, 2 * window.summary_tokens)
        messages = self._prompts.fold_messages(summary, chunk, prompt=prompt, omitted=omitted)
        return await self.call(messages, window.summary_tokens, what, meter)

    async def consolidate(
        self,
        memory: str | None,
        chunk: Sequence[Line],
        *,
        prompt: str,
        what: str,
        meter: Meter | None = None,
    ) -> str:
        """One consolidator call: the memory of `memory` and `chunk` (spec §4.9 item 5);
        `what` names the consolidation in the log and errors.

        Raises:
            EmptyAnswer: the model answered nothing.
        """
        window = self.window
        if memory and self._counter.text(memory) > 2 * window.summary_tokens:
            memory = cut(self._counter, memory, 2 * window.summary_tokens)
        messages = self._prompts.consolidate_messages(memory, chunk, prompt=prompt)
        return await self.call(messages, window.summary_tokens, what, meter)

    async def chunks(
        self,
        storage: StorageClient,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        after: int,
        capacity: int,
        before: int | None = None,
    ) -> AsyncGenerator[list[Line], None]:
        """The lines of the records after seq `after` (and before `before`), oldest first, in
        chunks of `capacity`, read page by page (never more than a page and a chunk held)."""
        request = storage_pb2.ListRecordsRequest(
            space_id=str(space_id), session_id=str(session_id), after_seq=after, limit=PAGE
        )
        if before is not None:
            request.before_seq = before
        chunk: list[Line] = []
        used = 0
        while True:
            reply = await storage.list_records(caller, request)
            for record in reply.records:
                line = self.line(context_record(record), capacity)
                if chunk and used + line.tokens > capacity:
                    yield chunk
                    chunk, used = [], 0
                chunk.append(line)
                used += line.tokens
            if not reply.next_page_token:
                break
            request.page_token = reply.next_page_token
        if chunk:
            yield chunk

    async def call(
        self, messages: list[LLMMessage], max_tokens: int, what: str, meter: Meter | None = None
    ) -> str:
        """Send a helper call (for `what`) that must fit the window with its answer; the
        cleaned answer, never empty (`meter` is told the call's usage).

        Raises:
            FailedPrecondition: it would not fit (a bug in the packing, never sent).
            EmptyAnswer: the answer is empty once its reasoning is removed.
            ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, over the slot limit.
        """
        window = self.window
        prompt = self._counter.messages(messages)
        if prompt + max_tokens > window.tokens:
            raise FailedPrecondition(
                f"a summary call of {prompt} tokens would not fit the model's window of "
                f"{window.tokens}; it was not sent",
                reason=WINDOW_TOO_SMALL,
            )
        completion = await self._provider.complete(messages, max_tokens=max_tokens)
        if meter is not None:
            meter(completion.usage)
        self._counter.calibration.observe(
            completion.usage.prompt_tokens, self._counter.raw(messages)
        )
        text = strip_think(completion.content)
        if not text:
            raise empty_answer(what, completion, max_tokens)
        size = len(text.encode())
        if size > self._slot_bytes:
            raise too_large(what, size, self._slot_bytes)
        return text
