"""How the SDK builds a request from a method's keywords: the request id of a retried
write, the optional fields set, and a refused value named by its keyword.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from stello_client.calls import new_request_id
from stello_client.errors import shown

M = TypeVar("M")


def request_id_or_new(request_id: str | None) -> str:
    """The caller's request id, or a new one: every write the SDK retries carries one."""
    return request_id or new_request_id()


def set_optional(message: Any, **fields: Any) -> None:
    """Set each field that is not None (proto3 optional fields keep their presence).

    Raises:
        TypeError, ValueError: a value the field cannot hold, naming the keyword.
    """
    for name, value in fields.items():
        if value is not None:
            try:
                setattr(message, name, value)
            except (TypeError, ValueError) as exc:
                raise _refusal(name, value, exc) from None


def request_of(kind: Callable[..., M], **fields: Any) -> M:
    """`kind(**fields)`, a request the SDK builds from a method's keywords.

    Raises:
        TypeError: a keyword's value is not of its field's type (protobuf's own
            message, "bad argument type for built-in operation", names no field).
        ValueError: a number past its field's range ("Value out of range: N"), or
            text that is not valid Unicode (a lone surrogate, which UTF-8 cannot encode).
    """
    try:
        return kind(**fields)
    except (TypeError, ValueError):
        for name, value in fields.items():
            try:
                kind(**{name: value})
            except (TypeError, ValueError) as refused:
                raise _refusal(name, value, refused) from None
        raise


def _refusal(name: str, value: Any, exc: TypeError | ValueError) -> TypeError | ValueError:
    """The error naming keyword `name` for protobuf's refusal `exc` of its value (which is
    not always rebuilt from one message: UnicodeEncodeError's constructor takes five)."""
    if isinstance(exc, UnicodeEncodeError):
        char = exc.object[exc.start]
        return ValueError(
            f"{name}: is not valid Unicode text (a lone surrogate U+{ord(char):04X} at "
            f"character {exc.start + 1} of {shown(exc.object)}): send text without it"
        )
    return type(exc)(_not_held(name, value))


def _not_held(name: str, value: Any) -> str:
    """Why keyword `name` was refused: its value, as a repr cut to 60 characters."""
    return f"{name}: not a value this field holds, got {shown(value)}"
