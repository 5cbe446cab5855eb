"""SQL of the request keys: `stello.idempotency`'s statements on a unit of work's connection.

The statements are the kernel's (the tree keeps its keys the same way); a key is
stored in the transaction of the work it answers for, so it exists iff that work
committed. Every statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid

import asyncpg

from stello import idempotency
from storage_service.models import RememberedResult


class KeyRepository(idempotency.KeyStatements):
    """The work-first key statements (`remember_new`, `stored`, ...) and the read of a
    caller's remembered entry, on a unit of work's connection."""

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def remembered(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> RememberedResult | None:
        """The live idempotency entry under the key, without locking it; None when absent."""
        row = await self._con.fetchrow(
            idempotency.SELECT, space_id, scope, request_id, idempotency.TTL_HOURS
        )
        if row is None:
            return None
        return RememberedResult(bytes(row["request_hash"]), bytes(row["response"]))
