"""SearchRecords and SearchSessions: the query parsed, one statement, the page's token."""

from __future__ import annotations

import binascii
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import asyncpg

from stello.errors import FailedPrecondition, InvalidArgument, session_not_found
from stello.reasons import SEARCH_TOO_BROAD
from stello.validation import fits_bigint, fits_real, fits_timestamptz
from storage_service import page_tokens
from storage_service.models import SessionMeta, Status
from storage_service.search.highlight import snippet, terms
from storage_service.search.query import parse_query
from storage_service.search.repository import After
from storage_service.sessions.repository import meta_of
from storage_service.unit import Database, UnitOfWork

T = TypeVar("T")

_VERSION = 1


@dataclass(frozen=True, slots=True)
class RecordSearch:
    """A SearchRecords request, validated."""

    space_id: uuid.UUID
    query: str
    session_id: uuid.UUID | None
    root_id: uuid.UUID | None
    relevance: bool
    page_size: int
    page_token: str


@dataclass(frozen=True, slots=True)
class Hit:
    """One record found, with its snippet and matches (code points)."""

    session_id: uuid.UUID
    label: str
    seq: int
    role: str
    created_at: datetime
    snippet: str
    snippet_offset: int
    matches: tuple[tuple[int, int], ...]
    reader_count: int
    rank: float


@dataclass(frozen=True, slots=True)
class HitPage:
    hits: tuple[Hit, ...]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class SessionHitPage:
    sessions: tuple[SessionMeta, ...]
    next_page_token: str


def _binding(*fields: object) -> str:
    return page_tokens.binding([str(f) for f in fields])


def _token(binding: str, position: dict[str, object]) -> str:
    return page_tokens.encode({"v": _VERSION, "q": binding, **position})


def _position(token: str, binding: str, rpc: str) -> dict[str, object]:
    try:
        payload = page_tokens.decode(token)
        if not isinstance(payload, dict) or payload.get("v") != _VERSION:
            raise ValueError("not a token")
        if payload.get("q") != binding:
            raise ValueError("issued for another search")
        return payload
    except (ValueError, TypeError, binascii.Error) as exc:
        raise foreign_token(rpc) from exc


# What a page token binds, by RPC: the request's fields a token of another search differs in.
_BOUND = {"SearchRecords": "this query, scope and order", "SearchSessions": "this query and status"}


def foreign_token(rpc: str) -> InvalidArgument:
    """The INVALID_ARGUMENT of a page token `rpc` did not issue for this request, naming
    what it binds and what to do."""
    return InvalidArgument.field(
        "page_token",
        f"was not issued by {rpc} for this space with {_BOUND[rpc]}: pass next_page_token "
        "with the same request, or leave it empty to start again",
    )


def _created_at(value: object) -> datetime:
    """A token's creation time, one that PostgreSQL's timestamptz holds."""
    at = datetime.fromisoformat(str(value))
    if not fits_timestamptz(at):
        raise ValueError("out of range")
    return at


def _after(payload: dict[str, object]) -> After:
    try:
        at = _created_at(payload["at"])
        session = uuid.UUID(str(payload["s"]))
        seq = payload["n"]
        rank = payload.get("r")
        horizon = payload.get("h")
        if not fits_bigint(seq):
            raise ValueError("bad seq")
        if rank is not None and not fits_real(rank):
            raise ValueError("bad rank")
        if horizon is not None and not isinstance(horizon, str):
            raise ValueError("bad horizon")
        return After(
            at,
            session,
            seq,
            None if rank is None else float(rank),
            None if horizon is None else _created_at(horizon),
        )
    except (KeyError, ValueError) as exc:
        raise foreign_token("SearchRecords") from exc


class SearchService:
    """Text search of a space's records and sessions (storage.proto, SearchRecords), each
    search's statements bounded by `timeout_s` (STELLO_STORAGE_SEARCH_TIMEOUT_S)."""

    __slots__ = ("_db", "_timeout_s")

    def __init__(self, db: Database, *, timeout_s: float = 10.0) -> None:
        self._db = db
        self._timeout_s = timeout_s

    async def _bounded(
        self, work: Callable[[UnitOfWork], Awaitable[T]], *, view: bool = False
    ) -> T:
        """Run a search's `work` in one transaction, its statements bounded (`view`: a
        search of a session's view, SearchRepository.settings).

        Raises:
            FailedPrecondition: reason SEARCH_TOO_BROAD, a statement ran past the bound.
        """

        async def run(uow: UnitOfWork) -> T:
            await uow.search.settings(self._timeout_s, view=view)
            return await work(uow)

        try:
            return await self._db.transaction(run)
        except asyncpg.QueryCanceledError as exc:
            raise FailedPrecondition(
                f"the search took longer than {self._timeout_s:g} s "
                "(STELLO_STORAGE_SEARCH_TIMEOUT_S); narrow it with session_id or root_id, "
                "or more words",
                reason=SEARCH_TOO_BROAD,
            ) from exc

    async def search_records(self, search: RecordSearch) -> HitPage:
        """One page of hits (see storage.proto, SearchRecords).

        Raises:
            InvalidArgument: a bad query or page_token; a root_id that names no root.
            NotFound: the scope's session is not a visible session of the space.
            FailedPrecondition: reason SEARCH_TOO_BROAD, the search ran past its time.
        """
        parsed = parse_query(search.query)
        binding = _binding(
            search.space_id, parsed.canonical, search.session_id, search.root_id, search.relevance
        )
        after = (
            _after(_position(search.page_token, binding, "SearchRecords"))
            if search.page_token
            else None
        )
        scope = search.session_id or search.root_id
        role = "session_id: session" if search.session_id else "root_id: session"

        async def work(uow: UnitOfWork) -> list[asyncpg.Record]:
            repo = uow.search
            if scope is not None:
                root = await repo.root_of(search.space_id, scope)
                if root is None:
                    raise session_not_found(scope, role)
                if search.root_id is not None and root != search.root_id:
                    # It would find nothing (no record's owner has it as its root), silently.
                    raise InvalidArgument.field(
                        "root_id",
                        f"names session {scope}, which is not a root (its root is {root}): "
                        "give its root, or session_id for that session's own view",
                    )
            if not parsed.text:
                return []
            text = parsed.normalised(await repo.normalised(parsed.terms()))
            if not text:
                return []
            return list(
                await repo.records(
                    search.space_id,
                    text,
                    session_id=search.session_id,
                    root_id=search.root_id,
                    relevance=search.relevance,
                    after=after,
                    limit=search.page_size + 1,
                )
            )

        rows = await self._bounded(work, view=search.session_id is not None)
        page = rows[: search.page_size]
        hits = tuple(_hit(row) for row in page)
        token = ""
        if len(rows) > search.page_size:
            last = hits[-1]
            token = _token(
                binding,
                {
                    "at": last.created_at.isoformat(),
                    "s": str(last.session_id),
                    "n": last.seq,
                    "r": last.rank if search.relevance else None,
                    # RELEVANCE: the walk ranks the matches written up to its first page.
                    "h": page[-1]["horizon"].isoformat() if search.relevance else None,
                },
            )
        return HitPage(hits, token)

    async def search_sessions(
        self,
        space_id: uuid.UUID,
        query: str,
        status: Status | None,
        page_size: int,
        page_token: str,
    ) -> SessionHitPage:
        """One page of sessions whose label or a metadata value matches (storage.proto).

        Raises:
            InvalidArgument: a bad query or page_token.
            FailedPrecondition: reason SEARCH_TOO_BROAD, the search ran past its time.
        """
        parsed = parse_query(query, all_prefix=True)
        binding = _binding(space_id, parsed.canonical, status)
        after: tuple[datetime, uuid.UUID] | None = None
        if page_token:
            payload = _position(page_token, binding, "SearchSessions")
            try:
                after = (_created_at(payload["at"]), uuid.UUID(str(payload["s"])))
            except (KeyError, ValueError) as exc:
                raise foreign_token("SearchSessions") from exc
        if not parsed.text:
            return SessionHitPage((), "")

        async def work_sessions(uow: UnitOfWork) -> list[asyncpg.Record]:
            return await uow.search.sessions(space_id, parsed.text, status, after, page_size + 1)

        rows = await self._bounded(work_sessions)
        page = tuple(meta_of(row) for row in rows[:page_size])
        token = ""
        if len(rows) > page_size:
            last = page[-1]
            token = _token(binding, {"at": last.created_at.isoformat(), "s": str(last.id)})
        return SessionHitPage(page, token)


def _hit(row: asyncpg.Record) -> Hit:
    """A row of SEARCH_RECORDS as a hit, its snippet cut around the first match."""
    text, offset, matches = snippet(row["content"], *terms(row["terms"]))
    return Hit(
        session_id=row["session_id"],
        label=row["label"],
        seq=row["seq"],
        role=row["role"],
        created_at=row["created_at"],
        snippet=text,
        snippet_offset=offset,
        matches=tuple(matches),
        reader_count=row["readers"],
        rank=float(row["rank"]),
    )
