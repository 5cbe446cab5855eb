"""Consolidation: a session's memory rewritten by the LLM (STELLO-SPEC §4.6, DESIGN §6).

`consolidate` is the Consolidate RPC, a fold (DESIGN §4.3): the memory
records the last seq it covers, so a consolidation reads the current memory
and only the records after that seq (all of them the first time), page by
page, in chunks that each fit the window with the memory and its answer; each
chunk is one call in the consolidator structure of spec §4.9 item 5 (the
memory so far, then the chunk's transcript), with the session's consolidator
prompt (its frozen override, else the configured ``consolidator`` text,
DESIGN §5.16); with no new record, one call over the memory alone. The last
answer replaces the memory (no trimming), with the seq it now covers.
Archived sessions are refused (DESIGN §5.4). It takes no turn lease: a turn
never writes memory.

`after_turn` is the automatic trigger: after a committed user turn whose new
turn_count is a multiple of `every_n_turns`, the same consolidation runs as a
background task. Its outcome is logged and counted (`succeeded`, `failed`,
and the Prometheus counter ``stello_gateway_auto_consolidations_total`` by
outcome, registered on the server's metrics registry) — never swallowed
silently. The app runs it as a `Background`: stopping waits briefly for the
tasks in flight, then cancels them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import replace

from prometheus_client import CollectorRegistry, Counter

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.folding import Folder
from agent_gateway.llm.prompt_config import SessionPrompts
from stello.common.v1 import common_pb2
from stello.errors import FailedPrecondition
from stello.reasons import SESSION_ARCHIVED

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0


class Consolidator:
    """Manual and automatic consolidation over storage and the provider."""

    def __init__(
        self,
        storage: StorageClient,
        folder: Folder,
        prompts: SessionPrompts,
        *,
        every_n_turns: int = 0,
        registry: Callable[[], CollectorRegistry | None] = lambda: None,
    ) -> None:
        """Set up the consolidator.

        Args:
            storage: the storage client.
            folder: makes the calls to the LLM that writes the memory.
            prompts: the session's consolidator prompt and the configured texts.
            every_n_turns: consolidate automatically every N committed turns; 0 = never.
            registry: gives the metrics registry to count on, once the server exists.
        """
        self._storage = storage
        self._folder = folder
        self._prompts = prompts
        self._every = every_n_turns
        self._registry = registry
        self._tasks: set[asyncio.Task[None]] = set()
        self._registered = False
        self.succeeded = 0
        """Automatic consolidations that wrote the memory."""
        self.failed = 0
        """Automatic consolidations that failed (logged with their error)."""
        self.outcomes = Counter(
            "stello_gateway_auto_consolidations",
            "Automatic consolidations after committed turns, by outcome.",
            ["outcome"],
            registry=None,
        )

    async def consolidate(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> str:
        """Fold the records after the memory's seq into the memory; answer it.

        Raises:
            FailedPrecondition: reason SESSION_ARCHIVED.
        """
        meta = await self._storage.get_session(caller, space_id, session_id)
        if meta.status == common_pb2.SESSION_STATUS_ARCHIVED:
            raise FailedPrecondition(
                f"session {session_id} is archived; unarchive it to consolidate it",
                reason=SESSION_ARCHIVED,
                metadata={"subject": f"session/{session_id}"},
            )
        (memory, covered), prompt = await asyncio.gather(
            self._storage.get_memory_covering(caller, space_id, session_id),
            self._prompts.consolidator(caller, space_id, session_id),
        )
        capacity = self._folder.capacity(prompt)
        last = covered or 0
        new_memory: str | None = None
        chunks = self._folder.chunks(self._storage, caller, space_id, session_id, last, capacity)
        async with aclosing(chunks):
            async for chunk in chunks:
                current = memory if new_memory is None else new_memory
                new_memory = await self._folder.consolidate(current, chunk, prompt=prompt)
                last = chunk[-1].seq
        if new_memory is None:  # nothing new: the memory alone, as the reference does
            new_memory = await self._folder.consolidate(memory, [], prompt=prompt)
        await self._storage.put_memory(caller, space_id, session_id, new_memory, covered=last)
        return new_memory

    def after_turn(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, turn_count: int
    ) -> None:
        """Start a consolidation in the background when `turn_count` hits the interval."""
        if self._every <= 0 or turn_count <= 0 or turn_count % self._every:
            return
        # Not bound to the caller's deadline: the turn has already answered.
        task = asyncio.create_task(
            self._auto(replace(caller, deadline=None), space_id, session_id, turn_count),
            name=f"consolidate-{session_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _auto(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, turn_count: int
    ) -> None:
        try:
            await self.consolidate(caller, space_id, session_id)
        except Exception:
            self.failed += 1
            self.outcomes.labels("failed").inc()
            log.exception(
                "automatic consolidation of session %s after turn %d failed",
                session_id,
                turn_count,
            )
        else:
            self.succeeded += 1
            self.outcomes.labels("succeeded").inc()

    async def drain(self) -> None:
        """Wait for the consolidations in flight (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def start(self) -> None:
        """Count on the server's metrics registry (called once the server exists)."""
        registry = self._registry()
        if registry is not None and not self._registered:
            registry.register(self.outcomes)
            self._registered = True

    async def stop(self) -> None:
        """Let running consolidations finish for a moment, then cancel the rest."""
        if not self._tasks:
            return
        _, late = await asyncio.wait(list(self._tasks), timeout=STOP_GRACE_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
