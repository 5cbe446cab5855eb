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

Nothing outlives erasure (DESIGN §4.8): a key is linked to the sessions whose
data its response holds (`idempotency_key_sessions`, migration 0011), and the
transaction that erases a session erases those responses with it
(`stello.stored.reply_erasure.ERASE_LINKED`: a tombstone with no hash and no response, so a
replay answers NOT_FOUND until the key expires; `stello.stored.reply_erasure.FORGET_LINKED` for a
provisional session that was never visible: the key goes, so its saga can start over). An entry of
an erased session (`Entry.erased`) never answers: `answer_of` raises NotFound.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import asyncpg

from stello.db.maintenance import across_spaces, bulk
from stello.errors import AlreadyExists, NotFound
from stello.reasons import REQUEST_ERASED, REQUEST_ID_REUSED

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
# expired. The answer's response is NULL exactly when the key is ours to fill
# (an erased key's is NULL too, and `erased` says so). The time is the
# insert's own (`EXCLUDED.created_at`, the column's default now()) and the ages
# are compared as UTC timestamps: Citus runs only immutable functions in an
# ON CONFLICT DO UPDATE, and `timestamptz - interval` is not (DESIGN §4.7); in
# UTC an interval of hours is the same span either way.
CLAIM = """
INSERT INTO idempotency_keys AS k (space_id, scope, request_id, request_hash, response)
VALUES ($1, $2, $3, $4, NULL)
ON CONFLICT (space_id, scope, request_id) DO UPDATE
SET request_hash = CASE WHEN (k.response IS NULL AND NOT k.erased)
                             OR k.created_at AT TIME ZONE 'UTC'
                                <= EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour'
                        THEN EXCLUDED.request_hash ELSE k.request_hash END,
    response = CASE WHEN k.created_at AT TIME ZONE 'UTC'
                         <= EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour'
                    THEN NULL ELSE k.response END,
    erased = k.erased AND k.created_at AT TIME ZONE 'UTC'
                          > EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour',
    created_at = CASE WHEN (k.response IS NULL AND NOT k.erased)
                           OR k.created_at AT TIME ZONE 'UTC'
                              <= EXCLUDED.created_at AT TIME ZONE 'UTC' - $5 * interval '1 hour'
                      THEN EXCLUDED.created_at ELSE k.created_at END
RETURNING request_hash, response, erased
"""

# The live entry (a claimed key, with no response yet, is none). An entry linked
# to a session being erased (hidden by DeleteSubtree, `provisional_until =
# 'infinity'`) answers as erased already. Each linked session is one probe of
# its key (a scalar subquery), not a join: statistics that knew of no hidden
# session made that a read of every session the space was erasing (30,000 for
# one replay while a big subtree went).
SELECT = """
SELECT k.request_hash, k.response,
       k.erased OR EXISTS (SELECT FROM idempotency_key_sessions l
                           WHERE l.space_id = $1 AND l.scope = $2 AND l.request_id = $3
                             AND (SELECT s.provisional_until FROM sessions s
                                  WHERE s.space_id = $1 AND s.id = l.session_id
                                  LIMIT 1) = 'infinity') AS erased
FROM idempotency_keys k
WHERE k.space_id = $1 AND k.scope = $2 AND k.request_id = $3
  AND k.created_at > now() - make_interval(hours => $4)
  AND (k.response IS NOT NULL OR k.erased)
"""

# Both writes of a response are functions of plain statements (migration 0034), each
# routed to the space's worker on Citus (as one statement their INSERTs were CTEs, which
# Citus planned recursively, through the coordinator); still one statement here.
# $6: the sessions whose data the response holds; links to others are dropped.
UPSERT = """
SELECT stello_remember($1, $2, $3, $4, $5, $6::uuid[])
"""

# Inserts the key with its response; an expired entry is replaced, a live one
# is left alone (false). Waits for a concurrent insert of the key. $7: the
# sessions whose data the response holds (linked when it is stored). The time
# and the comparison as in CLAIM (Citus: immutable functions only).
INSERT_NEW = """
SELECT stello_remember_new($1, $2, $3, $4, $5, $6, $7::uuid[])
"""

PURGE = "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(hours => $1)"
# One space's (a round done space by space when a node is out of reach: `Periodic.by_space`).
PURGE_IN_SPACE = (
    "DELETE FROM idempotency_keys"
    " WHERE space_id = $2 AND created_at < now() - make_interval(hours => $1)"
)


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

    Raises:
        NotFound: the key's session was erased (DESIGN §4.8).
        AlreadyExists: the key was used for a different request.
    """
    row = await con.fetchrow(CLAIM, space_id, scope, request_id, request_hash, TTL_HOURS)
    assert row is not None
    if row["response"] is None and not row["erased"]:
        return None
    return answer_of(_entry(row), request_id, request_hash)


async def remember(
    con: asyncpg.Connection,
    space_id: uuid.UUID,
    scope: str,
    request_id: str,
    request_hash: bytes,
    response: bytes,
    sessions: Sequence[uuid.UUID] = (),
) -> None:
    """Store the response of the work done in this transaction under the key, linked to
    `sessions` (those whose data it holds: it is erased with any of them)."""
    await con.execute(UPSERT, space_id, scope, request_id, request_hash, response, list(sessions))


async def remember_new(
    con: asyncpg.Connection,
    space_id: uuid.UUID,
    scope: str,
    request_id: str,
    request_hash: bytes,
    response: bytes,
    sessions: Sequence[uuid.UUID] = (),
) -> bool:
    """Store the response under a new (or expired) key, linked to `sessions`; False when a
    live entry holds the key."""
    return bool(
        await con.fetchval(
            INSERT_NEW,
            space_id,
            scope,
            request_id,
            request_hash,
            response,
            TTL_HOURS,
            list(sessions),
        )
    )


@dataclass(frozen=True, slots=True)
class Entry:
    """A live key: the hash of the request it answered and the stored response; `erased`
    when the session it answered for was erased since (no hash, no response kept)."""

    request_hash: bytes
    response: bytes
    erased: bool = False


def _entry(row: asyncpg.Record) -> Entry:
    if row["erased"]:
        return Entry(b"", b"", erased=True)
    return Entry(bytes(row["request_hash"]), bytes(row["response"]))


async def stored(
    con: asyncpg.Connection, space_id: uuid.UUID, scope: str, request_id: str
) -> Entry | None:
    """The live entry under the key, without locking it; None when there is none."""
    row = await con.fetchrow(SELECT, space_id, scope, request_id, TTL_HOURS)
    return None if row is None else _entry(row)


def erased_request(request_id: str) -> NotFound:
    """The NOT_FOUND of a request_id whose reply was erased since: its session erased, the
    records it held trimmed, or the shared memory entry it held removed."""
    return NotFound(
        f"request_id {request_id!r} was done, and what its reply held was deleted since "
        "(its session deleted, its records trimmed, or its shared memory entry removed): "
        "the reply was erased with it "
        "(a new request_id does the request again)",
        reason=REQUEST_ERASED,
    )


def answer_of(entry: Entry, request_id: str, request_hash: bytes) -> bytes:
    """The stored response when `entry` was stored for this request.

    Raises:
        NotFound: the entry's session was erased (its reply with it).
        AlreadyExists: the entry was stored for a different request.
    """
    if entry.erased:
        raise erased_request(request_id)
    if entry.request_hash != request_hash:
        raise AlreadyExists(
            f"request_id {request_id!r} was already used for a different request; "
            "use a new request_id for a new request",
            reason=REQUEST_ID_REUSED,
        )
    return entry.response


class Answered(Exception):
    """Raised inside a unit of work whose key an earlier call holds: rolls the work back;
    `response` (that call's, for the same request) is the answer."""

    def __init__(self, response: bytes) -> None:
        super().__init__("answered by an earlier call with the same request_id")
        self.response = response


async def purge_expired(con: asyncpg.Connection, space_id: uuid.UUID | None = None) -> str:
    """In the caller's transaction: delete keys older than the TTL, every space's (multi-shard
    on Citus, allowed for the rest of the transaction) or, with `space_id`, that space's alone
    (its statement pinned to the space); returns the command status."""
    if space_id is None:
        await across_spaces(con)
    await bulk(con)  # a backlog of expired keys may take longer than a batch's bound
    if space_id is None:
        return str(await con.execute(PURGE, TTL_HOURS))
    return str(await con.execute(PURGE_IN_SPACE, TTL_HOURS, space_id))


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
        sessions: Sequence[uuid.UUID] = (),
    ) -> None:
        """Store the response of this transaction's work under the request_id, linked to
        `sessions`."""
        await remember(self._con, space_id, scope, request_id, request_hash, response, sessions)

    async def remember_new(
        self,
        space_id: uuid.UUID,
        scope: str,
        request_id: str,
        request_hash: bytes,
        response: bytes,
        sessions: Sequence[uuid.UUID] = (),
    ) -> bool:
        """Store this transaction's response under a new key, linked to `sessions`; False
        when one is live."""
        return await remember_new(
            self._con, space_id, scope, request_id, request_hash, response, sessions
        )

    async def stored(self, space_id: uuid.UUID, scope: str, request_id: str) -> Entry | None:
        """The live entry under the key; None when none."""
        return await stored(self._con, space_id, scope, request_id)

    async def remember_or_answer(
        self,
        space_id: uuid.UUID,
        scope: str,
        request_id: str,
        request_hash: bytes,
        response: bytes,
        sessions: Sequence[uuid.UUID] = (),
    ) -> None:
        """After the work: store its response under the key (one statement), linked to
        `sessions`, or, when an earlier call's entry is live, raise `Answered` with its
        response (AlreadyExists for another request, NotFound when its session was erased)."""
        if await self.remember_new(space_id, scope, request_id, request_hash, response, sessions):
            return
        entry = await self.stored(space_id, scope, request_id)
        assert entry is not None  # locked live by the insert, read with the same now()
        raise Answered(answer_of(entry, request_id, request_hash))
