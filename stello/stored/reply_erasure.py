"""What erasure does to request_id replies (DESIGN §4.8), beside `stello.stored.idempotency`.

A reply holds the data of the sessions (and shared memory entries) it is linked to; the
transaction that erases them leaves the reply's key only a tombstone, so a replay of its
request_id answers NOT_FOUND REQUEST_ERASED (`stello.stored.idempotency.answer_of`), and the sweep
of a provisional session that was never visible forgets its keys whole.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

# What an erased key keeps: a tombstone, no hash and no response (a replay of its
# request_id answers NOT_FOUND REQUEST_ERASED, `answer_of`).
TOMBSTONE = "request_hash = '\\x'::bytea, response = NULL, erased = true"

# Erasure of sessions $2 (of space $1): the keys linked to any of them keep
# only a tombstone (no hash, no response: a replay answers NOT_FOUND); run in
# the transaction that deletes the sessions (their links then go by cascade).
ERASE_LINKED = f"""
UPDATE idempotency_keys k
SET {TOMBSTONE}
FROM (SELECT DISTINCT l.scope, l.request_id
      FROM idempotency_key_sessions l
      WHERE l.space_id = $1 AND l.session_id = ANY ($2::uuid[])) linked
WHERE k.space_id = $1 AND k.scope = linked.scope AND k.request_id = linked.request_id
"""

# A trim of session $2 (of space $1): its links to replies that hold its records
# (scopes $3), then those keys keep only a tombstone, as ERASE_LINKED's; run in the
# trim's transaction. Two single-table statements: Citus routes each whole to the
# space's shard (a join or subquery of the two tables it plans as more than one task).
RECORD_REPLIES = """
SELECT scope, request_id FROM idempotency_key_sessions
WHERE space_id = $1 AND session_id = $2 AND scope = ANY ($3::text[])
"""
ERASE_REPLIES = f"""
UPDATE idempotency_keys
SET {TOMBSTONE}
WHERE space_id = $1 AND NOT erased
  AND (scope, request_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))
"""

RECORD_SCOPES = (
    "gateway.Send",
    "gateway.SubmitToolResults",
    "storage.AppendRecords",
    "storage.Transact",
)
"""The scopes whose replies hold a session's records: a turn's (Send and SendStream,
SubmitToolResults and its stream), an append's, a batch's. A trim that removes records
erases them (`erase_record_replies`); the replies of other scopes (a session's creation,
an import) hold none and survive it (an import's decides whether a backup's session is
made again)."""

# The reply of key ($2, $3) of space $1 holds shared memory entry $4 (its slug, its
# summary): linked to it, and to no other entry (a key replaced after its expiry).
UNLINK_OTHER_ENTRIES = """
DELETE FROM idempotency_key_entries
WHERE space_id = $1 AND scope = $2 AND request_id = $3 AND entry_id <> $4
"""
LINK_ENTRY = """
INSERT INTO idempotency_key_entries (space_id, entry_id, scope, request_id)
VALUES ($1, $4, $2, $3)
ON CONFLICT DO NOTHING
"""

# The removal of shared memory entry $2 (of space $1): the keys linked to it keep only a
# tombstone, as ERASE_LINKED's. Run in the removal's transaction (migration 0036).
ERASE_ENTRY_REPLIES = f"""
UPDATE idempotency_keys k
SET {TOMBSTONE}
FROM (SELECT l.scope, l.request_id
      FROM idempotency_key_entries l
      WHERE l.space_id = $1 AND l.entry_id = $2) linked
WHERE k.space_id = $1 AND k.scope = linked.scope AND k.request_id = linked.request_id
  AND NOT k.erased
"""

# The sweep of provisional sessions $2 (never visible): their keys go whole.
FORGET_LINKED = """
DELETE FROM idempotency_keys k
USING (SELECT DISTINCT l.scope, l.request_id
       FROM idempotency_key_sessions l
       WHERE l.space_id = $1 AND l.session_id = ANY ($2::uuid[])) linked
WHERE k.space_id = $1 AND k.scope = linked.scope AND k.request_id = linked.request_id
"""


async def erase_linked(
    con: asyncpg.Connection, space_id: uuid.UUID, sessions: Sequence[uuid.UUID]
) -> None:
    """Erase the replies linked to `sessions` (being erased in this transaction), leaving
    tombstones: a replay of their request_ids answers NOT_FOUND."""
    await con.execute(ERASE_LINKED, space_id, list(sessions))


async def erase_record_replies(
    con: asyncpg.Connection, space_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    """Erase the replies linked to `session_id` that hold its records (RECORD_SCOPES), in
    the transaction of a trim that removed some, leaving tombstones: a replay of their
    request_ids answers NOT_FOUND REQUEST_ERASED, never the trimmed text."""
    linked = await con.fetch(RECORD_REPLIES, space_id, session_id, list(RECORD_SCOPES))
    if linked:
        scopes, request_ids = [r["scope"] for r in linked], [r["request_id"] for r in linked]
        await con.execute(ERASE_REPLIES, space_id, scopes, request_ids)


async def link_entry(
    con: asyncpg.Connection, space_id: uuid.UUID, scope: str, request_id: str, entry_id: uuid.UUID
) -> None:
    """Link the reply stored under the key in this transaction to shared memory entry
    `entry_id` (whose text it holds): erased with the entry (`erase_entry_replies`)."""
    await con.execute(UNLINK_OTHER_ENTRIES, space_id, scope, request_id, entry_id)
    await con.execute(LINK_ENTRY, space_id, scope, request_id, entry_id)


async def erase_entry_replies(
    con: asyncpg.Connection, space_id: uuid.UUID, entry_id: uuid.UUID
) -> None:
    """Erase the replies linked to shared memory entry `entry_id`, in the transaction that
    removes it, leaving tombstones: a replay answers NOT_FOUND REQUEST_ERASED, never the
    entry's text."""
    await con.execute(ERASE_ENTRY_REPLIES, space_id, entry_id)


async def forget_linked(
    con: asyncpg.Connection, space_id: uuid.UUID, sessions: Sequence[uuid.UUID]
) -> None:
    """Delete the keys linked to `sessions` (provisional, swept in this transaction)."""
    await con.execute(FORGET_LINKED, space_id, list(sessions))
