"""The sessions room's request fields: the session a request names, a status, a put's meta.

`target` is the (space_id, session_id) nearly every RPC starts from; `status` and
`meta_update` check what PutSession and PutSessionOp may write. Each adds its
violations under the field's path, so one InvalidArgument names them all.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from stello.common.v1 import common_pb2
from stello.enum_words import given
from stello.errors import Violations
from stello.validation import label, not_one_of, parse_uuid, space_uuid
from storage_service.convert import STATUS_FROM_PROTO
from storage_service.models import MetaUpdate, Status


class Target(Protocol):
    """A request naming one session of one space."""

    @property
    def space_id(self) -> str:
        """The tenant space."""
        ...

    @property
    def session_id(self) -> str:
        """The session."""
        ...


def target(request: Target, v: Violations | None = None) -> tuple[uuid.UUID, uuid.UUID]:
    """The (space_id, session_id) of a request; raises for malformed ids unless `v` collects."""
    own = v or Violations()
    space_id = space_uuid(request.space_id, own)
    session_id = parse_uuid(request.session_id, "session_id", own)
    if v is None:
        own.raise_if_any()
    return space_id, session_id


def status(
    value: int, name: str, v: Violations, *, allow_unspecified: bool = False
) -> Status | None:
    """A session status; UNSPECIFIED only where it means "no filter"."""
    if value == common_pb2.SESSION_STATUS_UNSPECIFIED and allow_unspecified:
        return None
    found = STATUS_FROM_PROTO.get(value)
    if found is None:
        v.add(name, not_one_of(common_pb2.SessionStatus, given(value)))
    return found


def meta_update(
    present: bool, message: common_pb2.SessionMeta, path: str, v: Violations
) -> MetaUpdate:
    """The id, label and status of a put (other meta fields are output only); required."""
    if not present:
        v.add(path, "is required")
        return MetaUpdate(uuid.UUID(int=0), "", "active")
    return MetaUpdate(
        session_id=parse_uuid(message.id, f"{path}.id", v),
        label=label(message.label, v, f"{path}.label"),
        status=status(message.status, f"{path}.status", v) or "active",
    )
