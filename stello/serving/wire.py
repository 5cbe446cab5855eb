"""Where a request that does not parse goes wrong, by field path (for its BadRequest).

protobuf's parser says only that a message failed ("String field had bad
UTF-8"); a client needs the field. `locate_parse_failure` walks the raw wire
format against the message's descriptor and names the first string that is not
UTF-8, the nesting past the parser's depth, or the bytes that are not a message.
It runs only after the parser refused the bytes, so it is never on a good
request's path.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from stello.errors import FieldViolation

PARSER_DEPTH = 100
"""protobuf's default recursion limit for nested messages."""

WHOLE_REQUEST = "request"
# Inside these the path stops growing: a Struct is named as the field that holds it.
_OPAQUE = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


class _Bad(Exception):
    def __init__(self, path: str, description: str) -> None:
        super().__init__(description)
        self.violation = FieldViolation(path or WHOLE_REQUEST, description)


def locate_parse_failure(descriptor: Descriptor, data: bytes) -> FieldViolation:
    """The violation that explains why `data` is not a `descriptor` message."""
    try:
        _walk(descriptor, memoryview(data), "", 1)
    except _Bad as bad:
        return bad.violation
    return FieldViolation(WHOLE_REQUEST, f"is not a valid {descriptor.name}")


def _varint(data: memoryview, at: int, path: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _Bad(path, "is truncated or malformed (a bad varint)")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _walk(
    descriptor: Descriptor, data: memoryview, path: str, depth: int, opaque: bool = False
) -> None:
    if depth > PARSER_DEPTH:
        raise _Bad(path, f"nests messages deeper than {PARSER_DEPTH} levels")
    seen: dict[int, int] = {}
    opaque = opaque or descriptor.full_name in _OPAQUE
    at = 0
    while at < len(data):
        tag, at = _varint(data, at, path)
        number, wire_type = tag >> 3, tag & 7
        field = descriptor.fields_by_number.get(number)
        name = path
        if field is not None and not opaque:
            name = f"{path}.{field.name}" if path else field.name
            if field.is_repeated:
                index = seen.get(number, 0)
                seen[number] = index + 1
                if not (field.message_type and field.message_type.GetOptions().map_entry):
                    name = f"{name}[{index}]"
        if wire_type == 0:
            _, at = _varint(data, at, name)
        elif wire_type in (1, 5):
            at += 8 if wire_type == 1 else 4
        elif wire_type == 2:
            size, at = _varint(data, at, name)
            if at + size > len(data):
                raise _Bad(name, "is truncated (a length past the end of the message)")
            if field is not None:
                _payload(field, data[at : at + size], name, depth, opaque)
            at += size
        else:
            raise _Bad(name, f"uses an unsupported wire type {wire_type}")
    if at > len(data):
        raise _Bad(path, "is truncated")


def _payload(
    field: FieldDescriptor, chunk: memoryview, name: str, depth: int, opaque: bool
) -> None:
    if field.type == FieldDescriptor.TYPE_STRING:
        try:
            str(chunk, "utf-8")
        except UnicodeDecodeError:
            raise _Bad(name, "is not valid UTF-8") from None
    elif field.message_type is not None:
        _walk(field.message_type, chunk, name, depth + 1, opaque)
