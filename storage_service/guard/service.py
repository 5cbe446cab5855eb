"""The fork guard (STELLO-SPEC §4.11, DESIGN §4.5): claims the gateway's built-in fork tool takes.

A claim is granted when the session has at least `min_turns` committed turns
and `cooldown_turns` have passed since its last granted claim; granting
records it, in the same transaction as the check, under the session's row
lock. A caller whose fork then failed gives the claim back. Knows nothing of
gRPC.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from storage_service.guard.repository import GuardState
from storage_service.models import session_not_found
from storage_service.unit import Database, UnitOfWork


@dataclass(frozen=True, slots=True)
class ForkClaim:
    """Whether a claim was granted, and the state it was judged by."""

    granted: bool
    state: GuardState


class ForkGuard:
    """ClaimFork and ReleaseForkClaim over the unit of work."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def claim(
        self, space_id: uuid.UUID, session_id: uuid.UUID, min_turns: int, cooldown_turns: int
    ) -> ForkClaim:
        """Check the guard and record the claim when it holds.

        Raises:
            NotFound: the session is not visible in the space.
        """

        async def work(uow: UnitOfWork) -> ForkClaim:
            state = await uow.guard.lock(space_id, session_id)
            if state is None:
                raise session_not_found(session_id)
            last = state.last_fork_turn
            granted = state.turn_count >= min_turns and (
                last is None or state.turn_count - last >= cooldown_turns
            )
            if granted:
                await uow.guard.record(space_id, session_id, state.turn_count)
            return ForkClaim(granted, state)

        return await self._db.transaction(work)

    async def release(
        self, space_id: uuid.UUID, session_id: uuid.UUID, claimed: int, previous: int | None
    ) -> bool:
        """Give a claim back; False when a later claim replaced it.

        Raises:
            NotFound: the session is not in the space.
        """
        found, released = await self._db.statement(
            lambda uow: uow.guard.release(space_id, session_id, claimed, previous)
        )
        if not found:
            raise session_not_found(session_id)
        return released
