"""AppendRecords, ListRecords and TrimRecords over the unit of work; knows nothing of gRPC.

An append without a request_id is one statement that writes its own event (no
BEGIN/COMMIT); with one, the append and its key share a transaction
(`storage_service.keys.idempotent`). A trim also drops the summaries that
covered what it removed, in its transaction (`trim`, which Transact's TrimOp
runs too). Pages are bounded in count and bytes and continued by seq (STYLE §17).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from storage_service.keys.idempotent import Codec, Idempotent
from storage_service.models import (
    Idempotency,
    NewRecord,
    RecordPage,
    RecordQuery,
    StoredRecord,
    session_not_found,
)
from storage_service.records import pages
from storage_service.unit import Database, UnitOfWork

APPEND_SCOPE = "storage.AppendRecords"


async def trim(uow: UnitOfWork, space_id: uuid.UUID, session_id: uuid.UUID, keep: int) -> int:
    """Keep the newest `keep` records of the view, and clear the cache when any went (the
    summaries no longer match the records); how many went. The session's row and its
    readers' are locked (`SessionRepository.lock_for_trim`, first in the transaction)."""
    removed = await uow.records.trim(space_id, session_id, keep)
    if removed:
        await uow.caches.clear(space_id, session_id)
    return removed


class RecordService:
    """A session's records: appended with the next seqs, paged, trimmed."""

    def __init__(
        self, db: Database, codec: Codec[tuple[StoredRecord, ...]], *, max_page_bytes: int
    ) -> None:
        self._db = db
        self._append_once = Idempotent(APPEND_SCOPE, codec)
        self._max_page_bytes = max_page_bytes

    async def append_records(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        records: Sequence[NewRecord],
        key: Idempotency | None = None,
    ) -> tuple[StoredRecord, ...]:
        """Append atomically with the next contiguous seqs; answers the stored records."""

        async def append(uow: UnitOfWork, alone: bool = False) -> tuple[StoredRecord, ...]:
            if not records:
                if not await uow.sessions.exists(space_id, session_id):
                    raise session_not_found(session_id)
                return ()
            stored = await uow.records.append(space_id, session_id, records, alone=alone)
            if stored is None:
                raise session_not_found(session_id)
            return stored

        if key is None:  # one statement, its event included: no BEGIN/COMMIT round trips
            return await self._db.statement(lambda uow: append(uow, alone=True))
        return await self._append_once.run(self._db, space_id, key, append, (session_id,))

    async def list_records(
        self, space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery
    ) -> RecordPage:
        """One page of the records `query` selects (ascending seq), bounded in count and bytes."""
        walk = (
            pages.resume(space_id, session_id, query, query.page_token)
            if query.page_token
            else query
        )
        found = await self._db.statement(
            lambda uow: uow.records.page(space_id, session_id, walk, self._max_page_bytes)
        )
        if found is None:
            raise session_not_found(session_id)
        records, more = found
        if not more:
            return RecordPage(tuple(records), "")
        position = records[0].seq if query.newest_first else records[-1].seq
        token = pages.next_token(space_id, session_id, query, position)
        return RecordPage(tuple(records), token)

    async def trim_records(
        self, space_id: uuid.UUID, session_id: uuid.UUID, keep_recent: int
    ) -> int:
        """Keep the newest `keep_recent` records; clears the cache when any went."""

        async def work(uow: UnitOfWork) -> int:
            if not await uow.sessions.lock_for_trim(space_id, [session_id], [session_id]):
                raise session_not_found(session_id)
            return await trim(uow, space_id, session_id, keep_recent)

        return await self._db.transaction(work)
