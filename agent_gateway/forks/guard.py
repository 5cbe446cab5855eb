"""The fork guard of ``stello_create_session`` (STELLO-SPEC §4.11, DESIGN §4.5).

A session may fork itself through the tool once it has
``STELLO_GATEWAY_FORK_MIN_TURNS`` committed turns, and then only every
``STELLO_GATEWAY_FORK_COOLDOWN_TURNS`` turns. Unlike the reference, which
keeps the last fork's turn in process memory, the counter is in the session's
row: storage's ClaimFork checks and records a claim in one transaction, so two
gateway processes (or two calls of one answer) cannot both fork inside a
cooldown. A claim whose fork fails is given back, and so is one whose turn was cancelled
while its fork was being made, or while storage was granting it (the claim's answer is
awaited whatever becomes of the turn: see `ForkGuard.claim`). A refusal is a tool error
result with the configured text (``fork_too_early`` / ``fork_cooling_down``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.llm import Prompts
from agent_gateway.llm.prompts.texts import FORK_COOLING_DOWN, FORK_TOO_EARLY
from stello.db.tasks import settled
from stello.errors import NotFound, StelloError
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)


class ForkGuard:
    """Claims forks of a session through storage's counter."""

    def __init__(
        self, storage: StorageClient, prompts: Prompts, *, min_turns: int, cooldown_turns: int
    ) -> None:
        self._storage = storage
        self._prompts = prompts
        self._min_turns = min_turns
        self._cooldown_turns = cooldown_turns

    @property
    def enabled(self) -> bool:
        """Whether either bound is set (else no claim is taken at all)."""
        return self._min_turns > 0 or self._cooldown_turns > 0

    async def claim(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> storage_pb2.ClaimForkResponse | str:
        """The granted claim, or the refusal the model is told.

        The claim is asked for without the caller's deadline (``call_timeout_s`` bounds it):
        storage may grant and record it whatever becomes of the caller, so its answer is
        always awaited. Cancelled meanwhile (the client left, its deadline passed), the call
        waits for that answer, gives a granted claim back (as `give_back_cancelled` does)
        and raises the cancellation; a second cancellation raises at once and leaves both
        running to their end."""
        asked = asyncio.ensure_future(
            self._storage.claim_fork(
                replace(caller, deadline=None),
                space_id,
                session_id,
                min_turns=self._min_turns,
                cooldown_turns=self._cooldown_turns,
            )
        )
        try:
            claim = await asyncio.shield(asked)
        except asyncio.CancelledError:
            await settled(self._give_back_if_granted(caller, space_id, session_id, asked))
            raise
        if claim.granted:
            return claim
        turns = claim.turn_count
        if turns < self._min_turns:
            return self._prompts.text(
                FORK_TOO_EARLY, turns=str(turns), min_turns=str(self._min_turns)
            )
        last = claim.last_fork_turn
        return self._prompts.text(
            FORK_COOLING_DOWN,
            turns=str(turns),
            last_fork=str(last),
            next_turn=str(last + self._cooldown_turns),
        )

    async def _give_back_if_granted(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        asked: asyncio.Future[storage_pb2.ClaimForkResponse],
    ) -> None:
        """Give back the claim `asked` is granted, once it answers (a failed ask took none)."""
        try:
            claim = await asked
        except StelloError as exc:
            log.debug("fork claim of %s asked by a cancelled turn failed: %s", session_id, exc)
            return
        if claim.granted:
            await self.give_back(replace(caller, deadline=None), space_id, session_id, claim)

    async def give_back(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        claim: storage_pb2.ClaimForkResponse,
    ) -> None:
        """Return the claim of a fork that failed (a failure to do so is logged: the session
        then waits out the cooldown). A session deleted meanwhile has no claim left to give
        back: that is no failure (DEBUG), as deletes during turns log none."""
        try:
            await self._storage.release_fork_claim(caller, space_id, session_id, claim)
        except NotFound:
            log.debug("fork claim of %s not given back: the session was deleted", session_id)
        except StelloError as exc:
            log.warning("could not give back the fork claim of %s: %s", session_id, exc)

    async def give_back_cancelled(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        claim: storage_pb2.ClaimForkResponse,
    ) -> None:
        """`give_back` the claim of a fork its turn's cancellation cut short (the client
        left, its deadline passed): the saga stopped before its commit answered, so the
        session is not made to wait out a cooldown for a fork it most likely does not have
        (a provisional session is swept). Shielded, without the caller's deadline (which may
        be what passed): a second cancellation leaves it running to its end."""
        await settled(self.give_back(replace(caller, deadline=None), space_id, session_id, claim))
