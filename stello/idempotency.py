"""request_id idempotency, shared by every service that accepts one (DESIGN §2).

Inside the caller's transaction, one of two shapes:

- `claim` before the work (one statement) serializes concurrent calls with the
  same key on the key's row and returns the stored response of an earlier
  identical call (or raises ALREADY_EXISTS for a different one); `remember`
  stores the response after the work;
- or the work first, then `remember_new` (one statement, the only one the key
  costs): it inserts the key with its response unless a live entry holds it
  (a concurrent call with the key waits on that row until this transaction
  ends). When it answers False the caller rolls its work back and answers from
  `stored` (`answer_of` tells a retry from another request). A call whose
  work fails looks the key up too, before answering the error: a retry whose
  work can no longer succeed still gets the first answer.

Either way a response is stored iff the work committed. Keys live 24 hours.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from typing import Protocol

import asyncpg

from stello.errors import AlreadyExists
from stello.reasons import REQUEST_ID_REUSED

TTL_HOURS = 24
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
# The time is the insert's own (`EXCLUDED.created_at`, the column's default
# now()) and the ages are compared as UTC timestamps: Citus runs only immutable
# functions in an ON CONFLICT DO UPDATE, and `timestamptz - interval` is not
# (DESIGN §4.7); in UTC an interval of hours is the same span either way.
CLAIM = """
INSERT INTO idempotency_keys AS k (space_id, scope, request_id, request_hash, response)
VALUES ($1, $2, $3, $4, NULL)
ON CONFLICT (space_id, scope, request_id) DO UPDATE
SET request_hash = CASE WHEN k.response IS NULL
                             OR k.created_at AT TIME ZONE 'UTC'
                                <= EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour'
                        THEN EXCLUDED.request_hash ELSE k.request_hash END,
    response = CASE WHEN k.created_at AT TIME ZONE 'UTC'
                         <= EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour'
                    THEN NULL ELSE k.response END,
    created_at = CASE WHEN k.response IS NULL
                           OR k.created_at AT TIME ZONE 'UTC'
                              <= EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour'
                      THEN EXCLUDED.created_at ELSE k.created_at END
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
SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
    created_at = EXCLUDED.created_at
"""

# Inserts the key with its response; an expired entry is replaced, a live one
# is left alone (no row returned). Waits for a concurrent insert of the key.
# The time and the comparison as in CLAIM (Citus: immutable functions only).
INSERT_NEW = """
INSERT INTO idempotency_keys AS k (space_id, scope, request_id, request_hash, response)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (space_id, scope, request_id) DO UPDATE
SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
    created_at = EXCLUDED.created_at
WHERE k.created_at AT TIME ZONE 'UTC'
      <= EXCLUDED.created_at AT TIME ZONE 'UTC' - make_interval(hours => $6)
RETURNING 1
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
    entry = (bytes(row["request_hash"]), bytes(row["response"]))
    return answer_of(entry, request_id, request_hash)


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


async def remember_new(
    con: asyncpg.Connection,
    space_id: uuid.UUID,
    scope: str,
    request_id: str,
    request_hash: bytes,
    response: bytes,
) -> bool:
    """Store the response under a new (or expired) key; False when a live entry holds it."""
    row = await con.fetchrow(
        INSERT_NEW, space_id, scope, request_id, request_hash, response, TTL_HOURS
    )
    return row is not None


async def stored(
    con: asyncpg.Connection, space_id: uuid.UUID, scope: str, request_id: str
) -> tuple[bytes, bytes] | None:
    """The live entry under the key as (request_hash, response), without locking it."""
    row = await con.fetchrow(SELECT, space_id, scope, request_id, TTL_HOURS)
    return None if row is None else (bytes(row["request_hash"]), bytes(row["response"]))


def answer_of(entry: tuple[bytes, bytes], request_id: str, request_hash: bytes) -> bytes:
    """The stored response when `entry` was stored for this request.

    Raises:
        AlreadyExists: the entry was stored for a different request.
    """
    if entry[0] != request_hash:
        raise AlreadyExists(
            f"request_id {request_id!r} was already used for a different request; "
            "use a new request_id for a new request",
            reason=REQUEST_ID_REUSED,
        )
    return entry[1]


class Answered(Exception):
    """Raised inside a unit of work whose key an earlier call holds: rolls the work back;
    `response` (that call's, for the same request) is the answer."""

    def __init__(self, response: bytes) -> None:
        super().__init__("answered by an earlier call with the same request_id")
        self.response = response


async def purge_expired(con: asyncpg.Connection) -> str:
    """Delete keys older than the TTL; returns the command status."""
    return str(await con.execute(PURGE, TTL_HOURS))


class KeyStatements:
    """The work-first key statements (and `remember`) on a repository's connection (mixed
    into the repositories of the services that accept a request_id)."""

    _con: asyncpg.Connection

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

    async def remember_new(
        self,
        space_id: uuid.UUID,
        scope: str,
        request_id: str,
        request_hash: bytes,
        response: bytes,
    ) -> bool:
        """Store this transaction's response under a new key; False when one is live."""
        return await remember_new(self._con, space_id, scope, request_id, request_hash, response)

    async def stored(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> tuple[bytes, bytes] | None:
        """The live entry under the key as (request_hash, response); None when none."""
        return await stored(self._con, space_id, scope, request_id)

    async def remember_or_answer(
        self,
        space_id: uuid.UUID,
        scope: str,
        request_id: str,
        request_hash: bytes,
        response: bytes,
    ) -> None:
        """After the work: store its response under the key (one statement), or, when an
        earlier call's entry is live, raise `Answered` with its response (AlreadyExists for
        another request)."""
        if await self.remember_new(space_id, scope, request_id, request_hash, response):
            return
        entry = await self.stored(space_id, scope, request_id)
        assert entry is not None  # locked live by the insert, read with the same now()
        raise Answered(answer_of(entry, request_id, request_hash))
