"""Request validation helpers shared by the servicers (proto -> domain input).

`request_violations` is the check the kernel's error boundary runs on every
request before its handler: what PostgreSQL text and jsonb cannot hold is
refused by field path, before anything is written or any model is called.
"""

from __future__ import annotations

import contextvars
import math
import re
import unicodedata
import uuid
from datetime import UTC, datetime
from typing import Any, TypeGuard

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from google.protobuf.message import Message

from stello.common.v1 import common_pb2
from stello.enum_words import enum_words, one_of
from stello.errors import FieldViolation, InvalidArgument, Violations
from stello.formats import json_text

MAX_LABEL_CHARS = 200
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

SKILL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
SKILL_NAME_RULE = "must be 1..64 characters of letters, digits, _ . : or -"
"""Letters, digits and ``_ . : -``: a name the model can spell back exactly. The gateway's
skills file and every allow-list (the gateway's CreateRoot/Fork, the tree's configs) keep it."""


def parse_uuid(value: str, name: str, violations: Violations | None = None) -> uuid.UUID:
    """Parse a UUID field; record (or raise) a violation naming the field when malformed."""
    try:
        if not value:
            raise ValueError
        return uuid.UUID(value)
    except ValueError:
        description = "is required" if not value else f"must be a UUID, got {value[:64]!r}"
        if violations is None:
            raise InvalidArgument.field(name, description) from None
        violations.add(name, description)
        return uuid.UUID(int=0)


checked_space: contextvars.ContextVar[tuple[str, uuid.UUID] | None] = contextvars.ContextVar(
    "checked_space", default=None
)
"""The current call's ``space_id`` as sent and as parsed, set by the auth check."""


def space_uuid(value: str, violations: Violations | None = None) -> uuid.UUID:
    """The ``space_id`` field `value` as a UUID: the one the auth check of this call parsed
    (no second parse), else parsed here like `parse_uuid`."""
    checked = checked_space.get()
    if checked is not None and checked[0] == value:
        return checked[1]
    return parse_uuid(value, "space_id", violations)


def page_size(
    value: int,
    violations: Violations,
    name: str = "page_size",
    *,
    maximum: int = MAX_PAGE_SIZE,
    default: int = DEFAULT_PAGE_SIZE,
) -> int:
    """Resolve a page size: 0 = `default`, negative or above `maximum` = a violation naming
    the range and the value, in the same words on every paged read (the searches' pages are
    smaller: storage_service.search.wire)."""
    if not 0 <= value <= maximum:
        violations.add(name, f"must be within 0..{maximum}, got {value}")
    return value or default


def seq_bound(request: Message, name: str, violations: Violations) -> int | None:
    """A request's optional exclusive seq bound `name` (ListRecords' after_seq, before_seq):
    unset = none; seqs start at 1, so a negative one is refused."""
    if not request.HasField(name):
        return None
    value: int = getattr(request, name)
    if value < 0:
        violations.add(name, "must not be negative (seqs start at 1)")
    return value


def not_one_of(enum: EnumTypeWrapper, value: object) -> str:
    """What a number `enum` has no value for is told: the values in the SDKs' words
    (lowercase, without the enum's prefix, UNSPECIFIED left out) and the number given."""
    return one_of(enum_words(enum.keys()), value)


def label(value: str, violations: Violations, name: str = "label") -> str:
    """Check a label: 1..200 characters, one line."""
    if not value.strip():
        violations.add(name, "must not be empty")
    elif len(value) > MAX_LABEL_CHARS:
        violations.add(name, f"must be at most {MAX_LABEL_CHARS} characters, got {len(value)}")
    elif has_control(value):
        violations.add(name, LABEL_ONE_LINE)
    return value


def skill_name(value: str, name: str, violations: Violations) -> bool:
    """Whether `value` is a name a skill can have (`SKILL_NAME`); a violation under `name`
    when not."""
    if SKILL_NAME.match(value):
        return True
    violations.add(name, f"{SKILL_NAME_RULE}, got {value[:80]!r}")
    return False


def utf8_within(value: str, max_bytes: int, name: str, violations: Violations) -> str:
    """`value`; a violation under `name` when its UTF-8 is over `max_bytes`."""
    size = len(value.encode())
    if size > max_bytes:
        violations.add(name, f"is {size} bytes, over the limit of {max_bytes}")
    return value


LABEL_ONE_LINE = "must be one line, without control characters (line breaks, escapes)"
"""Why a label with a control character is refused: every listing prints labels one per
line, and a terminal would run an escape sequence one carried."""


def has_control(text: str) -> bool:
    """True when `text` holds a control character (C0, DEL, C1) or a line or paragraph
    separator."""
    return any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in text)


# -- what a decoded page token may carry to PostgreSQL ----------------------
# Page tokens are the client's text: a position decoded from one is checked against
# what its column holds before it reaches the database, which would refuse it with
# an error that is no client's to read (DESIGN §7).

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FLOAT32_MAX = 3.4028234663852886e38


def fits_bigint(value: object) -> TypeGuard[int]:
    """True when `value` is an int (not a bool) that a PostgreSQL bigint holds."""
    return (
        isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX
    )


def fits_real(value: object) -> TypeGuard[int | float]:
    """True when `value` is a finite number (not a bool) that a PostgreSQL real holds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return -_FLOAT32_MAX <= value <= _FLOAT32_MAX
    return math.isfinite(value) and abs(value) <= _FLOAT32_MAX


def fits_timestamptz(value: datetime) -> bool:
    """True when `value` has a time zone and stays a datetime in UTC (years 1 to 9999,
    within PostgreSQL's timestamptz; an offset may push the edges of Python's range out)."""
    if value.tzinfo is None or value.utcoffset() is None:
        return False
    try:
        value.astimezone(UTC)
    except OverflowError:
        return False
    return True


# -- checks every request gets at the error boundary (DESIGN §7) --------------

MAX_STRUCT_DEPTH = 16
"""Deepest google.protobuf.Struct nesting a request may carry (a Struct or list is a level)."""

NUL_DESCRIPTION = "must not contain U+0000 (NUL)"
_STRUCT_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


def request_violations(message: Message, path: str = "") -> list[FieldViolation]:
    """What no stored text or JSON can hold, by field path: U+0000 in any string (map keys
    included), a Struct nested deeper than `MAX_STRUCT_DEPTH`, a NaN or infinite number."""
    found: list[FieldViolation] = []
    _message(message, path, found)
    return found


_SKIP, _TEXT, _MESSAGE, _STRUCT, _MAP = range(5)
_KINDS: dict[FieldDescriptor, int] = {}


def _kind(field: FieldDescriptor) -> int:
    """What the check does with a field (classified once per field: this runs on every call)."""
    kind = _KINDS.get(field)
    if kind is None:
        entry = field.message_type
        if field.type == FieldDescriptor.TYPE_STRING:
            kind = _TEXT
        elif entry is None:
            kind = _SKIP
        elif entry.GetOptions().map_entry:
            kind = _MAP
        elif entry.full_name in _STRUCT_TYPES:
            kind = _STRUCT
        else:
            kind = _MESSAGE
        _KINDS[field] = kind
    return kind


def _message(message: Message, path: str, found: list[FieldViolation]) -> None:
    for field, value in message.ListFields():
        kind = _kind(field)
        if kind == _SKIP:
            continue
        name = f"{path}.{field.name}" if path else field.name
        if kind == _MAP:
            assert field.message_type is not None
            _map(field.message_type, value, name, found)
        elif field.is_repeated:
            for i, item in enumerate(value):
                _value(kind, field, item, name, i, found)
        else:
            _value(kind, field, value, name, None, found)


def _map(entry: Descriptor, items: Any, name: str, found: list[FieldViolation]) -> None:
    value_field = entry.fields_by_name["value"]
    kind = _kind(value_field)
    for key, value in items.items():
        if isinstance(key, str) and "\x00" in key:
            found.append(FieldViolation(name, f"a key {NUL_DESCRIPTION}"))
        elif kind != _SKIP:
            _value(kind, value_field, value, f"{name}[{key!r}]", None, found)


def _value(
    kind: int,
    field: FieldDescriptor,
    value: Any,
    name: str,
    index: int | None,
    found: list[FieldViolation],
) -> None:
    if kind == _TEXT:
        if "\x00" in value:
            found.append(FieldViolation(_at(name, index), NUL_DESCRIPTION))
    elif kind == _STRUCT:
        problem = struct_problem(value)
        if problem:
            found.append(FieldViolation(_at(name, index), problem))
    else:
        _message(value, _at(name, index), found)


def _at(name: str, index: int | None) -> str:
    return name if index is None else f"{name}[{index}]"


def struct_problem(value: Message) -> str | None:
    """Why a Struct, Value or ListValue cannot be stored as JSON, or None."""
    # An explicit stack: a hostile Struct may nest as deep as the parser allows.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, struct_pb2.Value):
            which = item.WhichOneof("kind")
            if which == "string_value":
                if "\x00" in item.string_value:
                    return NUL_DESCRIPTION
            elif which == "number_value":
                if not math.isfinite(item.number_value):
                    return "holds a NaN or infinite number, which JSON cannot hold"
            elif which == "struct_value":
                stack.append((item.struct_value, depth))
            elif which == "list_value":
                stack.append((item.list_value, depth))
            continue
        depth += 1
        if depth > MAX_STRUCT_DEPTH:
            return f"nests deeper than {MAX_STRUCT_DEPTH} levels"
        if isinstance(item, struct_pb2.Struct):
            for key, child in item.fields.items():
                if "\x00" in key:
                    return f"a key {NUL_DESCRIPTION}"
                stack.append((child, depth))
        else:
            stack.extend((child, depth) for child in item.values)
    return None


def tool_arguments(text: str, name: str, v: Violations) -> None:
    """A tool call's arguments: a JSON object text, or "" for none (common.proto); strict
    JSON (`stello.formats.json_text`): no NaN or infinite number, no nesting past what we read."""
    if not text:
        return
    try:
        value = json_text.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        v.add(name, 'must be a JSON object text (e.g. {"q": "tides"}), or empty for none')


def record_tool_fields(
    role: str | None, calls: bool, tool_call_id: str | None, path: str, v: Violations
) -> None:
    """A record's tool fields for its `role` ("assistant", "tool", ...; None: unknown, not
    checked), its problems under `path`: only an ASSISTANT record makes tool calls (`calls`:
    it has some), and a TOOL record names the call it answers (`tool_call_id`), which no
    other record has. A model's API refuses a context that breaks these, so a session
    holding such a record could not be continued."""
    if role is None:
        return
    if calls and role != "assistant":
        v.add(f"{path}.tool_calls", f"are made by ASSISTANT records only, not {role.upper()}")
    if role == "tool" and not tool_call_id:
        v.add(f"{path}.tool_call_id", "is required on a TOOL record: the id of the call it answers")
    elif role != "tool" and tool_call_id is not None:
        v.add(
            f"{path}.tool_call_id",
            f"is set on TOOL records only (a tool's result), not {role.upper()}",
        )


def record_message_tools(record: common_pb2.Record, path: str, v: Violations) -> None:
    """`record_tool_fields` of a Record message (its role unknown or UNSPECIFIED: not
    checked, the role's own check says so)."""
    try:
        name = common_pb2.RecordRole.Name(record.role).removeprefix("RECORD_ROLE_").lower()
    except ValueError:
        return
    if name == "unspecified":
        return
    answers = record.tool_call_id if record.HasField("tool_call_id") else None
    record_tool_fields(name, bool(record.tool_calls), answers, path, v)


def tool_call(call_id: str, name: str, arguments_json: str, path: str, v: Violations) -> None:
    """A tool call to store (common.proto ToolCall), its problems under `path`: an id (a tool
    result answers the call by it, SubmitToolResults requires it), a name, and arguments that
    are a JSON object text or empty."""
    if not call_id:
        v.add(f"{path}.id", "is required: a tool result answers the call by its id")
    if not name:
        v.add(f"{path}.name", "is required")
    tool_arguments(arguments_json, f"{path}.arguments_json", v)
