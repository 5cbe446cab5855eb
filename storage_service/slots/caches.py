"""SQL of the compression cache: the summaries of a session's older records, kept by the seq
they cover (migration 0006).

Owns `compression_caches`. Every statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid

import asyncpg

from stello.errors import OutOfRange
from storage_service.models import MAX_SEQ, CompressionCache, session_not_found

# Summaries are kept by the seq they cover (migration 0006); the cache is the
# newest of them ($3: at or below that seq). Both tables pinned by the parameters,
# so Citus routes it to the space's worker (joined on the session's columns, the
# LATERAL ran a task per shard: explore5 F4). `{complete}` narrows it to the
# complete ones in GET_COMPLETE_CACHE: `NOT lossy` written out, so that every plan
# takes `compression_caches_complete` (migration 0047) and reads one summary, not
# every catch-up summary newer than it.
_GET_CACHE = """
SELECT s.id AS session_id, c.summary, c.covered_until_seq, c.lossy
FROM sessions s
LEFT JOIN (
    SELECT summary, covered_until_seq, lossy FROM compression_caches
    WHERE space_id = $1 AND session_id = $2
      AND covered_until_seq <= $3{complete}
    ORDER BY covered_until_seq DESC
    LIMIT 1
) c ON true
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""
GET_CACHE = _GET_CACHE.format(complete="")
GET_COMPLETE_CACHE = _GET_CACHE.format(complete=" AND NOT lossy")

# The session locked against its erasure (its key share), and the summary upserted at its seq;
# none past the session's last seq (it would stand in for records not yet written, and a turn
# would skip the records they get), as PutMemory's covered seq (PUT_MEMORY_COVERING).
_LOCKED = """WITH s AS (SELECT id FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity' AND last_seq >= $4 FOR KEY SHARE)"""
_UPSERT = """
INSERT INTO compression_caches (space_id, session_id, summary, covered_until_seq, lossy)
SELECT $1, s.id, $3::text, $4::bigint, $5::boolean FROM s
ON CONFLICT (space_id, session_id, covered_until_seq)
DO UPDATE SET summary = EXCLUDED.summary, lossy = EXCLUDED.lossy,
              updated_at = EXCLUDED.updated_at
RETURNING true
"""

# A put becomes the cache: it replaces the summary at its seq and drops the
# newer ones (they no longer follow from it), keeping the older ones.
PUT_CACHE = f"""
{_LOCKED},
dropped AS (
    DELETE FROM compression_caches
    WHERE space_id = $1 AND session_id = $2 AND covered_until_seq > $4
      AND EXISTS (SELECT FROM s)
){_UPSERT}"""

# A summary stored beside the newer ones (a background fold's progress).
PUT_CACHE_KEEPING_NEWER = f"""
{_LOCKED}{_UPSERT}"""

# Why a put stored nothing: the session's last seq (no row: not there).
LAST_SEQ = """
SELECT last_seq FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity'
"""

CLEAR_CACHE = """
DELETE FROM compression_caches WHERE space_id = $1 AND session_id = $2
"""


class CacheRepository:
    """Compression cache statements, on a unit of work's connection."""

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def get(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        at_or_below: int | None = None,
        complete_only: bool = False,
    ) -> tuple[bool, CompressionCache | None]:
        """(visible, the newest summary at or below a seq, complete if asked, or None)."""
        below = MAX_SEQ if at_or_below is None else at_or_below
        query = GET_COMPLETE_CACHE if complete_only else GET_CACHE
        row = await self._con.fetchrow(query, space_id, session_id, below)
        if row is None:
            return False, None
        if row["summary"] is None:
            return True, None
        return True, CompressionCache(row["summary"], row["covered_until_seq"], row["lossy"])

    async def put(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        cache: CompressionCache,
        keep_newer: bool = False,
        field: str = "cache.covered_until_seq",
    ) -> None:
        """Make `cache` the cache (newer summaries go, unless `keep_newer`).

        Raises:
            NotFound: the session is absent.
            OutOfRange: `covered_until_seq` (the request's `field`) is beyond the session's
                last seq; nothing was written.
        """
        try:
            stored = await self._con.fetchval(
                PUT_CACHE_KEEPING_NEWER if keep_newer else PUT_CACHE,
                space_id,
                session_id,
                cache.summary,
                cache.covered_until_seq,
                cache.lossy,
            )
        except asyncpg.ForeignKeyViolationError as exc:  # deleted under us
            raise session_not_found(session_id) from exc
        if not stored:
            last = await self._con.fetchval(LAST_SEQ, space_id, session_id)
            if last is None:
                raise session_not_found(session_id)
            raise OutOfRange.field(
                field,
                f"{cache.covered_until_seq} is beyond the session's last seq ({last}): a "
                "summary cannot cover records not yet written; nothing was written",
            )

    async def clear(self, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Drop every summary (they no longer match the records)."""
        await self._con.execute(CLEAR_CACHE, space_id, session_id)
