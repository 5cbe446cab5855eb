"""What the console's endpoints read from a request (`stello_console.api`): the JSON body,
bounded (MAX_BODY_BYTES), and its fields and query parameters as typed values; a wrong one is
a `ConsoleInputError` naming the form field."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request

from stello.formats import json_text
from stello_console.errors import ConsoleInputError

MAX_CURSOR_DIGITS = 18
MAX_SEQ = 2**63 - 1  # seqs are int64 on the wire
MIB = 1024 * 1024
# The largest request body the console reads (a JSON form): the gateway's own text limits
# default to 1 MiB a field (a Send's content: max_content_bytes; a record:
# STELLO_MAX_RECORD_BYTES; an insight or memory: STELLO_MAX_SLOT_BYTES), so this leaves room
# for a whole field written with JSON escapes. The gateway still judges each field.
MAX_BODY_BYTES = 8 * MIB


def cursor(request: Request, header: str | None, name: str) -> str | None:
    """The cursor in header `header` (or query parameter `name`), checked; None when absent."""
    raw = request.headers.get(header) if header else request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= MAX_CURSOR_DIGITS):
        raise ConsoleInputError(f"{name}: must be a cursor the console sent (an event id)")
    return raw


def check_id(value: str, name: str) -> None:
    try:
        canonical = str(uuid.UUID(value)) == value.lower()
    except ValueError:
        canonical = False
    if not canonical:
        raise ConsoleInputError(f"{name}: must be session ids (UUIDs), got {value!r}")


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object, read only up to MAX_BODY_BYTES: a larger Content-Length is
    refused before a byte is read, a longer streamed (chunked) body as soon as it passes it."""
    declared = request.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large()
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise _too_large()
    try:
        body = json_text.loads(data)
    except ValueError:  # not JSON, or nested past what Python's json reads
        raise ConsoleInputError("the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ConsoleInputError("the request body must be a JSON object")
    return body


def _too_large() -> ConsoleInputError:
    return ConsoleInputError(
        f"the request body is larger than the console's limit of {MAX_BODY_BYTES} bytes "
        f"({MAX_BODY_BYTES // MIB} MiB): send a shorter text",
        413,
        "RESOURCE_EXHAUSTED",
    )


def text(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ConsoleInputError(f"{name}: must be text")
    return unicode_text(value, name)


def unicode_text(value: str, name: str) -> str:
    """`value` when UTF-8 can carry it; JSON's "\\ud800" escapes decode to lone surrogates,
    which no text field holds (the SDK would refuse them naming its own keyword)."""
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ConsoleInputError(
            f"{name}: is not valid Unicode text (a lone surrogate at character "
            f"{exc.start + 1}): send text without it"
        ) from None
    return value


def profile_vars(body: dict[str, Any]) -> dict[str, str]:
    value = body.get("profile_vars") or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConsoleInputError("profile_vars: must map variable names to text")
    for name, text in value.items():
        unicode_text(name + text, "profile_vars")
    return value


def whole_number(body: dict[str, Any], name: str) -> int | None:
    """A whole number a seq (int64) can hold; the gateway judges its meaning."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConsoleInputError(f"{name}: must be a whole number")
    if not -MAX_SEQ - 1 <= value <= MAX_SEQ:
        raise ConsoleInputError(f"{name}: must be at most {MAX_SEQ} (a seq), got {value}")
    return value


def query_int(
    request: Request, name: str, default: int | None, *, minimum: int, maximum: int | None = None
) -> int | None:
    raw = request.query_params.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConsoleInputError(f"{name}: must be a whole number, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        # The services' words for a range (stello.validation.page_size): "within 1..100".
        bounds = f"at least {minimum}" if maximum is None else f"within {minimum}..{maximum}"
        raise ConsoleInputError(f"{name}: must be {bounds}, got {value}")
    return value
