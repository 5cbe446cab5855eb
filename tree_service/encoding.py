"""Encodings the tree service stores or hands out: config JSON, replayed responses, page tokens.

Pure functions, no I/O: the service calls them; the tests check them alone.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from stello.errors import InvalidArgument
from tree_service.models import Node, SessionConfig

_PROMPTS = ("compressor_prompt", "consolidator_prompt")
"""The config's optional prompt overrides, stored under their own names."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def config_to_json(config: SessionConfig) -> dict[str, Any]:
    """The stored JSON: a key only for each field that is set (skills [] included)."""
    stored: dict[str, Any] = {}
    if config.system_prompt is not None:
        stored["system_prompt"] = config.system_prompt
    if config.skills is not None:
        stored["skills"] = list(config.skills)
    for name in _PROMPTS:
        value = getattr(config, name)
        if value is not None:
            stored[name] = value
    return stored


def config_from_json(stored: dict[str, Any]) -> SessionConfig:
    """The config a stored JSON object describes, presence kept."""
    skills = stored.get("skills")
    return SessionConfig(
        system_prompt=stored.get("system_prompt"),
        skills=None if skills is None else tuple(skills),
        compressor_prompt=stored.get("compressor_prompt"),
        consolidator_prompt=stored.get("consolidator_prompt"),
    )


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(value)


def encode_node(node: Node) -> bytes:
    """A node as the stored response of an idempotent CreateSession."""
    return json.dumps(
        {
            "id": str(node.id),
            "parent_id": None if node.parent_id is None else str(node.parent_id),
            "children": [str(c) for c in node.children],
            "refs": [str(r) for r in node.refs],
            "depth": node.depth,
            "index": node.index,
            "label": node.label,
            "source_session_id": (
                None if node.source_session_id is None else str(node.source_session_id)
            ),
            "status": node.status,
        }
    ).encode()


def decode_node(stored: bytes) -> Node:
    """The node an idempotent CreateSession answered the first time."""
    data = json.loads(stored)
    return Node(
        id=uuid.UUID(data["id"]),
        parent_id=_uuid_or_none(data["parent_id"]),
        children=tuple(uuid.UUID(c) for c in data["children"]),
        refs=tuple(uuid.UUID(r) for r in data["refs"]),
        depth=data["depth"],
        index=data["index"],
        label=data["label"],
        source_session_id=_uuid_or_none(data["source_session_id"]),
        status=data["status"],
    )


def listing_binding(*fields: object) -> str:
    """What a cursor is bound to: a short digest of the listing's fields (its space, status
    and filters), so that a token is refused by a listing with other fields."""
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:16]


def encode_page_token(created_at: datetime, session_id: uuid.UUID, binding: str = "") -> str:
    """An opaque cursor: the (created_at, id) key of the page's last session and, for
    ListAll, the `listing_binding` of its fields."""
    micros = (created_at - _EPOCH) // _MICROSECOND
    bound = f".{binding}" if binding else ""
    return base64.urlsafe_b64encode(f"{micros}.{session_id.hex}{bound}".encode()).decode()


def decode_page_token(token: str, binding: str = "") -> tuple[datetime, uuid.UUID]:
    """The (created_at, id) key a token carries; INVALID_ARGUMENT when it is not ours or was
    answered to a listing of other fields (a token made before tokens were bound, without
    a binding, is still taken: one a client held across the upgrade)."""
    try:
        micros, hex_id, *bound = base64.urlsafe_b64decode(token.encode()).decode().split(".")
        key = _EPOCH + int(micros) * _MICROSECOND, uuid.UUID(hex=hex_id)
    except (binascii.Error, UnicodeError, ValueError, OverflowError):
        raise InvalidArgument.field(
            "page_token",
            "is not a token an earlier page of this listing answered; pass next_page_token as is",
        ) from None
    if bound and bound != [binding]:
        raise InvalidArgument.field(
            "page_token",
            "was answered to a listing with another status or other filters; pass "
            "next_page_token with the same request, or leave it empty to start again",
        )
    return key


def _ancestor_mac(key: bytes, space_id: uuid.UUID, session_id: uuid.UUID, after: uuid.UUID) -> str:
    """The signature of an ancestor token: HMAC-SHA256 under the page-token key (migration
    0031), cut to 128 bits, over the space, the session and the last ancestor answered."""
    message = f"{space_id.hex}.{session_id.hex}.{after.hex}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


def encode_ancestor_token(
    key: bytes, space_id: uuid.UUID, session_id: uuid.UUID, after: uuid.UUID
) -> str:
    """An opaque ListAncestors cursor: the session and the last ancestor answered, signed
    with `key`, so that only a cursor a page answered continues a walk (a hand-made one
    naming another branch's session would walk another chain)."""
    mac = _ancestor_mac(key, space_id, session_id, after)
    return base64.urlsafe_b64encode(f"a.{session_id.hex}.{after.hex}.{mac}".encode()).decode()


def decode_ancestor_token(
    key: bytes, token: str, space_id: uuid.UUID, session_id: uuid.UUID
) -> uuid.UUID:
    """The ancestor a token continues after; INVALID_ARGUMENT when a page of `session_id`
    in `space_id` did not answer it (signed with another key, or not at all)."""
    try:
        kind, session_hex, after_hex, mac = (
            base64.urlsafe_b64decode(token.encode()).decode().split(".")
        )
        if kind != "a" or uuid.UUID(hex=session_hex) != session_id:
            raise ValueError("issued for another session")
        after = uuid.UUID(hex=after_hex)
        if not hmac.compare_digest(mac, _ancestor_mac(key, space_id, session_id, after)):
            raise ValueError("not signed by this deployment")
        if after == session_id:
            raise ValueError("a session is not its own ancestor")
        return after
    except (binascii.Error, UnicodeError, ValueError):
        raise bad_ancestor_token() from None


def bad_ancestor_token() -> InvalidArgument:
    """The INVALID_ARGUMENT of a ListAncestors token that no page of this session answered."""
    return InvalidArgument.field(
        "page_token",
        "is not a token an earlier page of this session's ancestors answered; pass "
        "next_page_token as is",
    )
