"""request_id idempotency, shared by every service that accepts one (DESIGN §2).

Inside the caller's transaction: `claim` (one statement) serializes concurrent
calls with the same key on the key's row and returns the stored response of an
earlier identical call (or raises ALREADY_EXISTS for a different one);
`remember` stores the response in the same transaction as the work, so a
response is stored iff the work committed.
Keys live 24 hours.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from typing import Protocol

import asyncpg

from stello.errors import AlreadyExists

TTL_HOURS = 24
REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
MAX_REQUEST_ID_CHARS = 200


class KeyedRequest(Protocol):
    """The part of a protobuf request the fingerprint needs."""

    request_id: str

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...


def fingerprint(request: KeyedRequest) -> bytes:
    """SHA-256 of the request's deterministic encoding without its request_id.

    What tells a retry (same fingerprint) from another request under a used id.
    The caller's message is left as it is.
    """
    bare = copy.deepcopy(request)
    bare.request_id = ""
    return hashlib.sha256(bare.SerializeToString(deterministic=True)).digest()


# One statement claims the key: a new key is inserted with no response yet
# (other calls with the same key then wait on its row until this transaction
# ends); an existing one is locked and returned as it is, or reset when it has
# expired. The answer's response is NULL exactly when the key is ours to fill.
CLAIM = """
INSERT INTO idempotency_keys AS k (space_id, scope, request_id, request_hash, response)
VALUES ($1, $2, $3, $4, NULL)
ON CONFLICT (space_id, scope, request_id) DO UPDATE
SET request_hash = CASE WHEN k.response IS NULL OR k.created_at <= now() - $5 * interval '1 hour'
                        THEN EXCLUDED.request_hash ELSE k.request_hash END,
    response = CASE WHEN k.created_at <= now() - $5 * interval '1 hour'
                    THEN NULL ELSE k.response END,
    created_at = CASE WHEN k.response IS NULL OR k.created_at <= now() - $5 * interval '1 hour'
                      THEN now() ELSE k.created_at END
RETURNING request_hash, response
"""

SELECT = """
SELECT request_hash, response FROM idempotency_keys
WHERE space_id = $1 AND scope = $2 AND request_id = $3
  AND created_at > now() - make_interval(hours => $4) AND response IS NOT NULL
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
    """Lock the key for this transaction; return the earlier response, if any.

    One round trip. A call with the same key in another transaction waits here
    until this one ends, then sees its stored response (or, if it rolled back,
    claims the key itself).
    """
    row = await con.fetchrow(CLAIM, space_id, scope, request_id, request_hash, TTL_HOURS)
    assert row is not None
    if row["response"] is None:
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


class KeyStatements:
    """`claim` and `remember` on a repository's connection (mixed into the repositories of the
    services that accept a request_id)."""

    _con: asyncpg.Connection

    async def claim(
        self, space_id: uuid.UUID, scope: str, request_id: str, request_hash: bytes
    ) -> bytes | None:
        """Lock the request_id for this transaction; the stored response of an earlier call."""
        return await claim(self._con, space_id, scope, request_id, request_hash)

    async def remember(
        self,
        space_id: uuid.UUID,
        scope: str,
        request_id: str,
        request_hash: bytes,
        response: bytes,
    ) -> None:
        """Store the response of this transaction's work under the request_id."""
        await remember(self._con, space_id, scope, request_id, request_hash, response)
