"""Hostile request bytes no stub would send: invalid UTF-8, Structs nested past any limit;
and hostile JSON text: nested past what Python's `json` reads, or not strict JSON.

A generated stub refuses to serialize a lone surrogate, so the tests write
strings holding the marker U+E000 and swap its UTF-8 bytes (``EE 80 80``) for
those of the surrogate U+D800 (``ED A0 80``): the same length, so every
length prefix stays right and only the text is invalid.
"""

from __future__ import annotations

import base64

from google.protobuf import struct_pb2
from google.protobuf.message import Message

MARKER = "\ue000"
_MARKER_BYTES = MARKER.encode()
_SURROGATE_BYTES = b"\xed\xa0\x80"


def invalid_utf8(message: Message) -> bytes:
    """`message` serialized, with every MARKER in its strings made invalid UTF-8."""
    data = message.SerializeToString()
    assert _MARKER_BYTES in data, "put MARKER in a string field first"
    return data.replace(_MARKER_BYTES, _SURROGATE_BYTES)


def nested_struct(levels: int, leaf: struct_pb2.Value | None = None) -> struct_pb2.Struct:
    """A Struct ``{"a": {"a": ... }}`` of `levels` Structs (the innermost holds `leaf`)."""
    top = struct_pb2.Struct()
    current = top
    for _ in range(levels - 1):
        current = current.fields["a"].struct_value
    if leaf is not None:
        current.fields["leaf"].CopyFrom(leaf)
    else:
        current.SetInParent()  # the innermost Struct is there, empty
    return top


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """One length-delimited field (a string, bytes or message) on the wire."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def deep_struct_bytes(levels: int) -> bytes:
    """A serialized Struct of `levels` nested Structs, past what protobuf lets one build."""
    struct = b""
    for _ in range(levels):
        value = length_delimited(5, struct)  # Value.struct_value
        entry = length_delimited(1, b"a") + length_delimited(2, value)  # map entry "a" -> value
        struct = length_delimited(1, entry)  # Struct.fields
    return struct


def deep_json_object(levels: int) -> str:
    """A JSON object text ``{"a":[[...]]}`` holding `levels` nested arrays: an object, but
    nested past what Python's `json` reads (RecursionError) at about a thousand."""
    return '{"a":' + "[" * levels + "]" * levels + "}"


def deep_page_token(levels: int) -> str:
    """A page token (unpadded URL-safe base64) of a JSON array nested `levels` deep."""
    text = "[" * levels + "]" * levels
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


NOT_STRICT_JSON = ('{"a":NaN}', '{"a":Infinity}', '{"a":-Infinity}', '{"a":1e999}')
"""JSON object texts Python's `json` reads though JSON has no such number (1e999: inf)."""
