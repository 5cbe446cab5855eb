"""SQL of the request keys: `stello.stored.idempotency`'s statements on a unit of work's connection.

The statements are the kernel's (the tree keeps its keys the same way); a key is
stored in the transaction of the work it answers for, so it exists iff that work
committed. Every statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid

import asyncpg

from stello.errors import NotFound
from stello.reasons import SESSION_NOT_FOUND
from stello.stored import idempotency
from storage_service.models import RememberedResult


class KeyRepository(idempotency.KeyStatements):
    """The work-first key statements (`remember_new`, `stored`, ...) and the read of a
    caller's remembered entry, on a unit of work's connection."""

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def remembered(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> RememberedResult | None:
        """The live idempotency entry under the key, without locking it; None when absent.

        Raises:
            NotFound: the entry's session was erased (its reply with it).
        """
        entry = await idempotency.stored(self._con, space_id, scope, request_id)
        if entry is None:
            return None
        if entry.erased:
            raise idempotency.erased_request(request_id)
        return RememberedResult(entry.request_hash, entry.response)

    async def remember_linked(
        self,
        space_id: uuid.UUID,
        scope: str,
        request_id: str,
        request_hash: bytes,
        response: bytes,
        sessions: list[uuid.UUID],
        *,
        require_new: bool,
    ) -> bool:
        """A caller's entry (`remember`, or `remember_new` with `require_new`: False when a
        live entry holds the key), linked to `sessions`.

        Raises:
            NotFound: one of `sessions` is not a session of the space.
        """
        entry = (space_id, scope, request_id, request_hash, response, sessions)
        try:
            if require_new:
                return await self.remember_new(*entry)
            await self.remember(*entry)
            return True
        except asyncpg.ForeignKeyViolationError as exc:
            raise NotFound(
                "a session the remembered result names was not found", reason=SESSION_NOT_FOUND
            ) from exc
