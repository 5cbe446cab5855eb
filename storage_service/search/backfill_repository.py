"""SQL of the search backfill (migrations 0035, 0038, 0041, 0042, 0043, 0045, 0048, 0049):
each space's pass over its records.

`search_backfill` holds one row per space that had sessions when 0035, 0038, 0041, 0042, 0043,
0045, 0048 or 0049 changed what `stello_search_vector` makes of a text: where the space's pass
stands (the last (session_id, seq) it went past, the primary key's order) and what it did. A
batch is one transaction: the global advisory lock (one batch at a time across replicas and
workers), the space's row locked, the next keys read, the rows among them whose
stored vector is not the function's rewritten (`content = content` recomputes a
STORED generated column; an UPDATE that names no column it reads does not), the
cursor saved. Every statement pins the space but `PENDING`, the job's look for
work across spaces (maintenance, `stello.db.maintenance.across_spaces`), one probe of the
partial index `search_backfill_pending`, empty once every pass is finished.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from stello.db.maintenance import across_spaces, bounded
from storage_service.search.letters import SQL_CASED
from storage_service.search.query import QURANIC_MARKS, VOWEL_MARKS
from storage_service.search.symbols import SQL_SYMBOLS

# pg advisory lock key of the backfill ("stellosb"): one batch at a time, deployment-wide.
LOCK_KEY = 0x7374656C6C6F7362
TRY_LOCK = "SELECT pg_try_advisory_xact_lock($1)"

# The spaces whose pass is not finished, $1 of them.
PENDING = """
SELECT space_id FROM search_backfill
WHERE finished_at IS NULL
ORDER BY space_id
LIMIT $1
"""

# The space's row, held for the batch's transaction, and the time (a parameter of SAVE).
LOCK_SPACE = """
SELECT after_session, after_seq, now() AS now
FROM search_backfill
WHERE space_id = $1 AND finished_at IS NULL
FOR UPDATE
"""

# The next $4 keys after ($2, $3): one range of the primary key.
BATCH_KEYS = """
SELECT session_id, seq FROM records
WHERE space_id = $1 AND (session_id, seq) > ($2::uuid, $3::bigint)
ORDER BY session_id, seq
LIMIT $4
"""

# The rows of the range ($2, $3] .. ($4, $5) whose vector changes: only a content with
# ASCII punctuation (0038; `<` and `>`, 0035), a mark, a full-width form or U+3000 (0041),
# or a Latin letter with diacritics or a combining mark (0042), or a symbol (symbols.py), a
# variation selector, a combining mark for symbols or "ẞ" (0043), or a letter past ASCII
# with a lowercase or the final sigma (0045, letters.py `LOWER`), or "ё" or a Hebrew or Arabic
# vowel mark (0048, query.py `VOWEL_MARKS`), or the Arabic tatweel or a Quranic mark (0049,
# query.py `QURANIC_MARKS`; `stello_search_vector` changes no other), and of those only the
# ones whose stored vector differs from the function's (`3 < 4` or `Hello, world.` give the
# same words).
REWRITE = (
    r"""
UPDATE records SET content = content
WHERE space_id = $1
  AND (session_id, seq) > ($2::uuid, $3::bigint)
  AND (session_id, seq) <= ($4::uuid, $5::bigint)
  AND (content ~ '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]'
       OR content ~ '[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]'
       OR content ~ '[\uff01-\uff5e\u3000]'
       OR content ~ '[\u00c0-\u024f\u1e00-\u1eff\u0300-\u036f]'
       OR content ~ '[SYMBOLS\ufe00-\ufe0f\u20d0-\u20ff]'
       OR content ~ '[CASED]'
       OR content ~ '[\u0451VOWELSQURANIC]')
  AND search_vector IS DISTINCT FROM stello_search_vector(content)
""".replace("SYMBOLS", SQL_SYMBOLS)
    .replace("CASED", SQL_CASED)
    .replace("VOWELS", VOWEL_MARKS)
    .replace("QURANIC", QURANIC_MARKS)
)

SAVE = """
UPDATE search_backfill
SET after_session = $2, after_seq = $3, rows_read = rows_read + $4,
    rows_rewritten = rows_rewritten + $5, finished_at = $6
WHERE space_id = $1
"""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one batch did: keys read, rows rewritten, and whether the space's pass ended."""

    read: int
    rewritten: int
    finished: bool


class BackfillRepository:
    """The backfill's statements, on a unit of work's connection."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def pending(self, limit: int) -> list[uuid.UUID]:
        """Up to `limit` spaces whose pass is not finished, in the caller's transaction."""
        await across_spaces(self._con)  # the spaces of every shard: maintenance
        return [row["space_id"] for row in await self._con.fetch(PENDING, limit)]

    async def batch(self, space_id: uuid.UUID, rows: int) -> Batch | None:
        """The space's next batch of at most `rows` keys, in the caller's transaction; None
        when another batch holds the lock. A space whose pass is finished (or that is gone)
        reads nothing."""
        if not await self._con.fetchval(TRY_LOCK, LOCK_KEY):
            return None
        await bounded(self._con)  # maintenance: a node that never answers ends the batch
        cursor = await self._con.fetchrow(LOCK_SPACE, space_id)
        if cursor is None:
            return Batch(0, 0, True)
        after = (cursor["after_session"], cursor["after_seq"])
        keys = await self._con.fetch(BATCH_KEYS, space_id, *after, rows)
        finished = len(keys) < rows
        rewritten = 0
        if keys:
            last = (keys[-1]["session_id"], keys[-1]["seq"])
            status = await self._con.execute(REWRITE, space_id, *after, *last)
            rewritten = int(status.rpartition(" ")[2])
            after = last
        done_at: datetime | None = cursor["now"] if finished else None
        await self._con.execute(SAVE, space_id, *after, len(keys), rewritten, done_at)
        return Batch(len(keys), rewritten, finished)
