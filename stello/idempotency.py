"""request_id idempotency, shared by every service that accepts one (DESIGN §2).

Inside the caller's transaction: `claim` serializes concurrent calls with the
same key and returns the stored response of an earlier identical call (or
raises ALREADY_EXISTS for a different one); `remember` stores the response in
the same transaction as the work, so a response is stored iff the work committed.
Keys live 24 hours.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Protocol

import asyncpg

from stello.errors import AlreadyExists

TTL_HOURS = 24
REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
MAX_REQUEST_ID_CHARS = 200


class Message(Protocol):
    """The part of a protobuf message the fingerprint needs."""

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...


def fingerprint(request: Message) -> bytes:
    """SHA-256 of the request's deterministic encoding (callers clear request_id first)."""
    return hashlib.sha256(request.SerializeToString(deterministic=True)).digest()


LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || '/' || $2 || '/' || $3, 0))"

SELECT = """
SELECT request_hash, response FROM idempotency_keys
WHERE space_id = $1 AND scope = $2 AND request_id = $3
  AND created_at > now() - make_interval(hours => $4)
"""

UPSERT = """
INSERT INTO idempotency_keys (space_id, scope, request_id, request_hash, response)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (space_id, scope, request_id) DO UPDATE
SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response, created_at = now()
"""

PURGE = "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(hours => $1)"


async def claim(
    con: asyncpg.Connection,
    space_id: uuid.UUID,
    scope: str,
    request_id: str,
    request_hash: bytes,
) -> bytes | None:
    """Lock the key for this transaction; return the earlier response, if any."""
    await con.execute(LOCK, space_id, scope, request_id)
    row = await con.fetchrow(SELECT, space_id, scope, request_id, TTL_HOURS)
    if row is None:
        return None
    if bytes(row["request_hash"]) != request_hash:
        raise AlreadyExists(
            f"request_id {request_id!r} was already used for a different request; "
            "use a new request_id for a new request",
            reason=REQUEST_ID_REUSED,
        )
    return bytes(row["response"])


async def remember(
    con: asyncpg.Connection,
    space_id: uuid.UUID,
    scope: str,
    request_id: str,
    request_hash: bytes,
    response: bytes,
) -> None:
    """Store the response of the work done in this transaction under the key."""
    await con.execute(UPSERT, space_id, scope, request_id, request_hash, response)


async def purge_expired(con: asyncpg.Connection) -> str:
    """Delete keys older than the TTL; returns the command status."""
    return str(await con.execute(PURGE, TTL_HOURS))
