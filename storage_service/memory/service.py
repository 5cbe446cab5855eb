"""A space's shared memory (DESIGN §4.5, STELLO-SPEC §1.11): list, get, upsert, remove.

Knows nothing of gRPC. Writes run in one transaction with their event and,
with a request_id, with the stored reply (`storage_service.keys.idempotent`); the reply is
kept as JSON, without the body an upsert wrote (a replay is the same request,
so its body is the one to answer). An upsert's reply holds the entry's slug and
summary: it is linked to the entry (its `entry_id`) and erased when the entry is
removed (DESIGN §4.8, migration 0036); a replace keeps the entry, so its replies
stay.
"""

from __future__ import annotations

import binascii
import json
import uuid
from datetime import datetime

from stello.errors import InvalidArgument, NotFound, ResourceExhausted
from stello.reasons import SHARED_MEMORY_ENTRY_NOT_FOUND, SHARED_MEMORY_FULL
from storage_service import page_tokens
from storage_service.keys.idempotent import Idempotent
from storage_service.models import Idempotency, SharedMemoryEntry, SharedMemoryPage, Upserted
from storage_service.unit import Database, UnitOfWork

UPSERT_SCOPE = "storage.UpsertSharedMemoryEntry"
REMOVE_SCOPE = "storage.RemoveSharedMemoryEntry"


class _UpsertCodec:
    """An upsert's reply without its body (the replayed request carries it)."""

    def __init__(self, body: str) -> None:
        self._body = body

    def encode(self, value: Upserted) -> bytes:
        """The stored form: slug, summary, timestamps, created."""
        entry = value.entry
        return json.dumps(
            {
                "slug": entry.slug,
                "summary": entry.summary,
                "created_at": entry.created_at.isoformat(),
                "updated_at": entry.updated_at.isoformat(),
                "created": value.created,
                "entry_id": None if entry.entry_id is None else str(entry.entry_id),
            }
        ).encode()

    def decode(self, data: bytes) -> Upserted:
        """The reply a first call answered, with this request's body."""
        stored = json.loads(data)
        entry = SharedMemoryEntry(
            stored["slug"],
            stored["summary"],
            self._body,
            datetime.fromisoformat(stored["created_at"]),
            datetime.fromisoformat(stored["updated_at"]),
            uuid.UUID(stored["entry_id"]) if stored.get("entry_id") else None,
        )
        return Upserted(entry, bool(stored["created"]))


class _RemoveCodec:
    """A remove's reply: whether an entry went."""

    def encode(self, value: bool) -> bytes:
        """b"1" or b"0"."""
        return b"1" if value else b"0"

    def decode(self, data: bytes) -> bool:
        """What a first call answered."""
        return data == b"1"


def _page_token(space_id: uuid.UUID, last: SharedMemoryEntry) -> str:
    at = page_tokens.micros(last.created_at)
    return page_tokens.encode({"space": str(space_id), "at": at, "slug": last.slug})


def _parse_page_token(token: str, space_id: uuid.UUID) -> tuple[datetime, str]:
    try:
        payload = page_tokens.decode(token)
        slug = payload["slug"]
        if payload["space"] != str(space_id) or not isinstance(slug, str):
            raise ValueError("issued for another space")
        # What the column holds: a slug without NUL.
        if "\x00" in slug:
            raise ValueError("out of range")
        return page_tokens.time_of(payload["at"]), slug
    except (ValueError, KeyError, TypeError, OverflowError, binascii.Error) as exc:
        raise InvalidArgument.field(
            "page_token", "was not issued by ListSharedMemory for this space"
        ) from exc


def entry_not_found(slug: str) -> NotFound:
    """The NOT_FOUND of a slug the space holds no entry for."""
    return NotFound(
        f"shared memory entry {slug!r} not found",
        reason=SHARED_MEMORY_ENTRY_NOT_FOUND,
        metadata={"slug": slug},
    )


class SharedMemoryService:
    """The shared memory RPCs' behaviour over the unit of work."""

    def __init__(self, db: Database, *, max_entries: int) -> None:
        self._db = db
        self._max_entries = max_entries
        self._remove_once = Idempotent(REMOVE_SCOPE, _RemoveCodec())

    async def list_entries(
        self, space_id: uuid.UUID, page_size: int, page_token: str
    ) -> SharedMemoryPage:
        """One page of entries in insertion order (no bodies) and the space's count."""
        after = _parse_page_token(page_token, space_id) if page_token else None
        rows, total = await self._db.statement(
            lambda uow: uow.memory.page(space_id, after, page_size + 1)
        )
        page = tuple(rows[:page_size])
        more = len(rows) > page_size
        return SharedMemoryPage(page, _page_token(space_id, page[-1]) if more else "", total)

    async def get_entry(self, space_id: uuid.UUID, slug: str) -> SharedMemoryEntry:
        """One entry, body included.

        Raises:
            NotFound: the space holds no entry `slug`.
        """
        entry = await self._db.statement(lambda uow: uow.memory.get(space_id, slug))
        if entry is None:
            raise entry_not_found(slug)
        return entry

    async def upsert_entry(
        self,
        space_id: uuid.UUID,
        slug: str,
        summary: str,
        body: str,
        key: Idempotency | None = None,
    ) -> Upserted:
        """Create or replace the entry, with its event (and its reply under `key`).

        Raises:
            ResourceExhausted: SHARED_MEMORY_FULL, a new slug in a space at its cap.
        """
        cap = self._max_entries

        async def upsert(uow: UnitOfWork) -> Upserted:
            upserted = await uow.memory.upsert(space_id, slug, summary, body, cap)
            if upserted is None:
                raise ResourceExhausted(
                    f"the space holds {cap} shared memory entries, the most it may "
                    f"(STELLO_STORAGE_MAX_SHARED_MEMORY_ENTRIES); {slug!r} was not added: "
                    "remove an entry or replace an existing slug",
                    reason=SHARED_MEMORY_FULL,
                )
            return upserted

        if key is None:
            return await self._db.transaction(upsert)
        request_id = key.request_id

        async def link(uow: UnitOfWork, upserted: Upserted) -> None:
            entry_id = upserted.entry.entry_id
            assert entry_id is not None  # a written entry has its id
            await uow.memory.link_reply(space_id, UPSERT_SCOPE, request_id, entry_id)

        once = Idempotent(UPSERT_SCOPE, _UpsertCodec(body))
        return await once.run(self._db, space_id, key, upsert, link=link)

    async def remove_entry(
        self, space_id: uuid.UUID, slug: str, key: Idempotency | None = None
    ) -> bool:
        """Remove the entry; whether there was one."""
        if key is None:
            return await self._db.transaction(lambda uow: uow.memory.remove(space_id, slug))
        return await self._remove_once.run(
            self._db, space_id, key, lambda uow: uow.memory.remove(space_id, slug)
        )
