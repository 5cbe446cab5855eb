"""The background fold: a lossy catch-up summary replaced by a complete one (DESIGN §4.3).

A turn whose tail needed more compressor calls than a turn may make stored a
lossy summary (`agent_gateway.history.compression`). After its commit — or after any
turn that finds the newest summary lossy (a gateway restarted meanwhile) —
the gateway folds, in the background and one call at a time, every record
from the newest complete summary (or the first record) through the lossy one's
seq, reading the records page by page, and stores the result as a complete
summary at that seq (PutCompressionCache, which also drops the newer summaries
built on the lossy one: the next turn compresses from the complete one). It
repeats while the newest summary is lossy. One job per session per process;
outcomes are logged and counted, never swallowed. The app runs it as a
background: stopping waits briefly, then cancels.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import aclosing
from dataclasses import replace

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.folding import Folder
from agent_gateway.llm.prompt_config import SessionPrompts
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

MAX_ROUNDS = 10
"""Lossy summaries folded per job before it gives up (turns keep making new ones)."""
STOP_GRACE_S = 5.0


class BackgroundFolds:
    """Runs background folds, one per session at a time."""

    def __init__(self, storage: StorageClient, folder: Folder, prompts: SessionPrompts) -> None:
        self._storage = storage
        self._folder = folder
        self._prompts = prompts
        self._tasks: dict[tuple[uuid.UUID, uuid.UUID], asyncio.Task[None]] = {}
        self.succeeded = 0
        """Jobs that left a complete newest summary."""
        self.failed = 0
        """Jobs that failed (logged with their error)."""

    def schedule(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Start a fold of the session's lossy summary unless one is running here."""
        key = (space_id, session_id)
        if key in self._tasks:
            return
        # Not bound to the caller's deadline: the turn has already answered.
        task = asyncio.create_task(
            self._job(replace(caller, deadline=None), space_id, session_id),
            name=f"fold-{session_id}",
        )
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._tasks.pop(key, None))

    async def _job(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        try:
            for _ in range(MAX_ROUNDS):
                if not await self.fold_once(caller, space_id, session_id):
                    break
        except Exception:
            self.failed += 1
            log.exception("background fold of session %s failed", session_id)
        else:
            self.succeeded += 1

    async def fold_once(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Replace the newest summary, when lossy, by a complete one; whether it was."""
        newest = await self._storage.get_compression_cache(caller, space_id, session_id)
        if newest is None or not newest.lossy:
            return False
        base = await self._storage.get_compression_cache(
            caller,
            space_id,
            session_id,
            at_or_below_seq=newest.covered_until_seq,
            complete_only=True,
        )
        text = base.summary if base else None
        start = base.covered_until_seq if base else 0
        prompt = await self._prompts.compressor(caller, space_id, session_id)
        capacity = self._folder.capacity(prompt)
        chunks = self._folder.chunks(
            self._storage,
            caller,
            space_id,
            session_id,
            start,
            capacity,
            before=newest.covered_until_seq + 1,
        )
        async with aclosing(chunks):
            async for chunk in chunks:
                text = await self._folder.fold(text, chunk, prompt=prompt)
        complete = storage_pb2.CompressionCache(
            summary=text or "", covered_until_seq=newest.covered_until_seq, lossy=False
        )
        await self._storage.put_compression_cache(caller, space_id, session_id, complete)
        return True

    async def drain(self) -> None:
        """Wait for the folds in flight (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    def start(self) -> None:
        """Nothing to start: jobs start with the turns that need them."""

    async def stop(self) -> None:
        """Let running folds finish for a moment, then cancel the rest."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
