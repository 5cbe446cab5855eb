"""The page tokens of storage's listings (ListRecords, ListSessions, ListSharedMemory,
SearchRecords, SearchSessions): a JSON position in unpadded URL-safe base64, which each
listing checks against its own request before its position reaches PostgreSQL.

A token is the client's text: `decode` gives what it holds and each listing checks every
field (`time_of` a time, `stello.validation` the rest), refusing it as INVALID_ARGUMENT
`page_token` naming what issues it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from stello.formats import json_text
from stello.validation import fits_bigint

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode(payload: Mapping[str, object]) -> str:
    """The token carrying `payload`."""
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def decode(token: str) -> Any:
    """What `token` carries (JSON: any type; the caller checks it).

    Raises:
        ValueError: not base64 (binascii.Error) or not JSON (`stello.formats.json_text`: nested
            past what Python's json reads, a NaN or infinite number, too).
    """
    padded = token + "=" * (-len(token) % 4)
    return json_text.loads(base64.urlsafe_b64decode(padded.encode()))


def binding(fields: Sequence[object]) -> str:
    """A short digest of the request `fields` a token is issued for (JSON values)."""
    digest = hashlib.sha256(json.dumps(list(fields)).encode()).digest()[:12]
    return base64.urlsafe_b64encode(digest).decode()


def micros(when: datetime) -> int:
    """`when` as a token carries it: microseconds since the epoch."""
    return (when - EPOCH) // timedelta(microseconds=1)


def time_of(value: object) -> datetime:
    """The time a token's microseconds stand for.

    Raises:
        ValueError: not a whole number a bigint holds.
        OverflowError: past the years a datetime holds.
    """
    if not fits_bigint(value):
        raise ValueError("not a time")
    return EPOCH + timedelta(microseconds=value)
