"""GetSession, PutSession and ListSessions over the unit of work; knows nothing of gRPC.

Reads answer NotFound for a session that is absent or provisional; PutSession
changes label and status of an existing session and never creates one (ids are
born in the tree, DESIGN §3). ListSessions pages by (created_at, id), the token
bound to its space and status filter.
"""

from __future__ import annotations

import binascii
import uuid
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime

from stello.errors import InvalidArgument
from storage_service import page_tokens
from storage_service.jobs.repository import Coverage, JobState
from storage_service.models import (
    MetaUpdate,
    SessionMeta,
    SessionPage,
    SessionSlots,
    SlotName,
    Status,
    session_not_found,
)
from storage_service.unit import Database, UnitOfWork


def _page_token(space_id: uuid.UUID, status: Status | None, last: SessionMeta) -> str:
    payload = {
        "space": str(space_id),
        "status": status or "",
        "at": page_tokens.micros(last.created_at),
        "id": str(last.id),
    }
    return page_tokens.encode(payload)


def _parse_page_token(
    token: str, space_id: uuid.UUID, status: Status | None
) -> tuple[datetime, uuid.UUID]:
    try:
        payload = page_tokens.decode(token)
        if payload["space"] != str(space_id) or payload["status"] != (status or ""):
            raise ValueError("issued for another space or filter")
        return page_tokens.time_of(payload["at"]), uuid.UUID(str(payload["id"]))
    except (ValueError, KeyError, TypeError, OverflowError, binascii.Error) as exc:
        raise InvalidArgument.field(
            "page_token", "was not issued by ListSessions for this space and status filter"
        ) from exc


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session's meta, the slots read (None: none asked), its coverage and jobs."""

    meta: SessionMeta
    slots: SessionSlots | None
    coverage: Coverage
    jobs: list[JobState]


class SessionService:
    """The conversation meta of a session: read (with its slots, if asked), put, listed."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def get_session(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionMeta:
        """The meta of a visible session."""
        meta = await self._db.statement(lambda uow: uow.sessions.get(space_id, session_id))
        if meta is None:
            raise session_not_found(session_id)
        return meta

    async def get_session_with_slots(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slots: AbstractSet[SlotName]
    ) -> tuple[SessionMeta, SessionSlots]:
        """The meta of a visible session and its `slots` (the others None), one statement."""
        found = await self._db.statement(
            lambda uow: uow.slots.get_with_meta(space_id, session_id, slots)
        )
        if found is None:
            raise session_not_found(session_id)
        return found

    async def get_session_view(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slots: AbstractSet[SlotName]
    ) -> SessionView:
        """The meta of a visible session, its `slots` (none: not read) and its progress: how
        far its summaries and memory cover it, and its background jobs (DESIGN §4.8)."""

        async def read(uow: UnitOfWork) -> SessionView:
            found: SessionSlots | None = None
            if slots:
                with_slots = await uow.slots.get_with_meta(space_id, session_id, slots)
                meta, found = with_slots if with_slots else (None, None)
            else:
                meta = await uow.sessions.get(space_id, session_id)
            coverage = await uow.jobs.progress(space_id, session_id) if meta else None
            if meta is None or coverage is None:
                raise session_not_found(session_id)
            jobs = await uow.jobs.of_session(space_id, session_id)
            return SessionView(meta, found, coverage, jobs)

        return await self._db.transaction(read)

    async def put_session(self, space_id: uuid.UUID, update: MetaUpdate) -> SessionMeta:
        """Replace label and status of an existing session (never creates one)."""
        meta = await self._db.transaction(lambda uow: uow.sessions.put(space_id, update))
        if meta is None:
            raise session_not_found(update.session_id)
        return meta

    async def list_sessions(
        self, space_id: uuid.UUID, status: Status | None, page_size: int, page_token: str
    ) -> SessionPage:
        """One page of visible sessions by (created_at, id)."""
        after = _parse_page_token(page_token, space_id, status) if page_token else None
        rows = await self._db.statement(
            lambda uow: uow.sessions.page(space_id, status, after, page_size + 1)
        )
        page = tuple(rows[:page_size])
        more = len(rows) > page_size
        return SessionPage(page, _page_token(space_id, status, page[-1]) if more else "")
