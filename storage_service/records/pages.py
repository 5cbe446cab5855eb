"""ListRecords page tokens: where the walk stopped, bound to the query that started it.

A token carries the seq the next page starts beyond (after it walking
oldest-first, before it walking newest-first) and a digest of the query's
space, session, role, seq bounds, direction and offset; a token presented
with another query is refused. The position is a seq, never an offset, so a
page costs the same however deep the walk is (STYLE §17).
"""

from __future__ import annotations

import binascii
import uuid
from dataclasses import replace

from stello.errors import InvalidArgument
from storage_service import page_tokens
from storage_service.models import RecordQuery

_VERSION = 1


def _binding(space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery) -> str:
    fields = [
        str(space_id),
        str(session_id),
        query.role or "",
        query.after_seq,
        query.before_seq,
        query.newest_first,
        query.offset,
    ]
    return page_tokens.binding(fields)


def next_token(
    space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery, position: int
) -> str:
    """The token of the page after one whose walk ended at seq `position`."""
    payload = {"v": _VERSION, "q": _binding(space_id, session_id, query), "seq": position}
    return page_tokens.encode(payload)


def resume(
    space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery, token: str
) -> RecordQuery:
    """The query of the page `token` points at: the walk's bound moved, offset consumed.

    Raises:
        InvalidArgument: the token is malformed or was issued for another query.
    """
    try:
        payload = page_tokens.decode(token)
        if payload["v"] != _VERSION or payload["q"] != _binding(space_id, session_id, query):
            raise ValueError("issued for another query")
        position = payload["seq"]
        if not isinstance(position, int) or isinstance(position, bool):
            raise ValueError("no seq")
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidArgument.field(
            "page_token",
            "was not issued by ListRecords for this session with these role, after_seq, "
            "before_seq, newest_first and offset",
        ) from exc
    if query.newest_first:
        return replace(query, before_seq=position, offset=0)
    return replace(query, after_seq=position, offset=0)
