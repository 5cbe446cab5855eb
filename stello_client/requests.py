"""How the SDK builds a request from a method's keywords: the request id of a retried
write, the optional fields set, and a refused value named by its keyword.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf import message
from google.protobuf.descriptor import FieldDescriptor

from stello_client import types
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
                raise _refusal(name, value, exc, _field(message, name)) from None


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
                raise _refusal(name, value, refused, _field(kind, name)) from None
        raise


def _refusal(
    name: str, value: Any, exc: TypeError | ValueError, field: FieldDescriptor | None
) -> TypeError | ValueError:
    """The error naming keyword `name` for protobuf's refusal `exc` of its value (which is
    not always rebuilt from one message: UnicodeEncodeError's constructor takes five)."""
    if isinstance(exc, UnicodeEncodeError):
        char = exc.object[exc.start]
        return ValueError(
            f"{name}: is not valid Unicode text (a lone surrogate U+{ord(char):04X} at "
            f"character {exc.start + 1} of {shown(exc.object)}): send text without it"
        )
    held = "" if field is None else f": it holds {_holds(field)}"
    if isinstance(value, message.Message):
        path = _id_path(value) if field is not None and _holds(field) == "str" else None
        hint = f" (pass its .{path})" if path else ""
        return type(exc)(f"{name}: not a value this field holds, got a {_kind(value)}{held}{hint}")
    return type(exc)(f"{_not_held(name, value)}{held}")


def _not_held(name: str, value: Any) -> str:
    """Why keyword `name` was refused: its value, as a repr cut to 60 characters."""
    return f"{name}: not a value this field holds, got {shown(value)}"


def _kind(value: message.Message) -> str:
    """A message's type as an error names it (its text would run over lines)."""
    return type(value).__name__


def _id_path(value: message.Message) -> str | None:
    """Where a message holds the id a field wants: `id` (a SessionSummary, a TreeNode),
    or one message field's `id` (a SessionView's `node.id`); None: nowhere, or not one."""
    if _has_id(value.DESCRIPTOR):
        return "id"
    found = [
        field.name
        for field in value.DESCRIPTOR.fields
        if field.message_type is not None and not field.is_repeated and _has_id(field.message_type)
    ]
    return f"{found[0]}.id" if len(found) == 1 else None


def _has_id(descriptor: Any) -> bool:
    """Whether a message type has a str field `id`."""
    field = descriptor.fields_by_name.get("id")
    return field is not None and field.cpp_type == FieldDescriptor.CPPTYPE_STRING


def _field(message: Any, name: str) -> FieldDescriptor | None:
    """The field `name` of a message or message class (None: no such field)."""
    field: FieldDescriptor | None = message.DESCRIPTOR.fields_by_name.get(name)
    return field


def _holds(field: FieldDescriptor) -> str:
    """What a field holds, in Python's terms: "str", "a list of ...", "a mapping of ..."."""
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return f"a mapping of {_one(key)} to {_one(value)}"
    if field.is_repeated:
        return f"a list of {_one(field)}"
    return _one(field)


INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}
SCALARS = {
    FieldDescriptor.CPPTYPE_STRING: "str",
    FieldDescriptor.CPPTYPE_BOOL: "bool",
    FieldDescriptor.CPPTYPE_DOUBLE: "float",
    FieldDescriptor.CPPTYPE_FLOAT: "float",
}


def _one(field: FieldDescriptor) -> str:
    """What one value of a field holds (a list's item, a mapping's key or value)."""
    if field.message_type is not None:
        name = field.message_type.name
        return (
            f"stello_client.types.{name}" if hasattr(types, name) else field.message_type.full_name
        )
    if field.enum_type is not None:
        return f"a {field.enum_type.name} name or number"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return "bytes"
    if field.cpp_type in INT_RANGES:
        low, high = INT_RANGES[field.cpp_type]
        return f"an int from {low} to {high}"
    return SCALARS.get(field.cpp_type, "a value of its type")
