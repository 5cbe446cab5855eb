"""Hostile requests for every RPC of a service, and the checks every answer must pass.

The RPCs come from the service's descriptor (a new RPC is fuzzed without touching the
tests) and the codes each may answer from the comments of its proto: the ``Errors:`` of
the RPC plus what ``common.proto`` says any RPC may answer. Requests are built field by
field from the request's descriptor with values chosen to hurt: U+0000, text that becomes
invalid UTF-8 on the wire, Structs deeper than allowed or holding NaN, malformed and
unknown ids, negative and huge numbers, unknown enum values, bytes that do not parse.
Each goes out as raw bytes through a generic call, so nothing a stub would refuse is
kept from the server.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import message_factory, struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from tests.support.hostile import MARKER, invalid_utf8, nested_struct

PROTOS = Path(__file__).resolve().parents[2] / "protos"

EXAMPLES = int(os.environ.get("STELLO_FUZZ_EXAMPLES", "25"))
"""Requests per RPC. The default run is small and the same every time (derandomized);
``STELLO_FUZZ_EXAMPLES=200`` runs a bigger, random search."""
DERANDOMIZE = "STELLO_FUZZ_EXAMPLES" not in os.environ

# What common.proto says every RPC may answer besides its own errors (the rest of that
# list, UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, INTERNAL, cannot happen here: the
# database is up, no call is abandoned, and a bug is what the fuzz looks for).
COMMON_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
OPEN_FOR_S = 0.3
"""How long an endless stream is watched before the client cancels it."""
_CODE_NAMES = {code.name: code for code in grpc.StatusCode}
_RPC = re.compile(r"((?:[ \t]*//[^\n]*\n)+)[ \t]*rpc (\w+)\(")


@dataclass(frozen=True, slots=True)
class Rpc:
    """One RPC: its path, request type, whether it streams, and the codes it may answer."""

    name: str
    path: str
    request: Descriptor
    streaming: bool
    codes: frozenset[grpc.StatusCode]
    endless: bool = False
    """A stream that stays open until the client cancels (WatchSpace)."""


def rpcs(service: ServiceDescriptor, proto: str) -> list[Rpc]:
    """Every RPC of `service`, with the codes its comments in `proto` document."""
    text = (PROTOS / proto).read_text(encoding="utf-8")
    comments = {name: " ".join(comment.split()) for comment, name in _RPC.findall(text)}
    documented = {
        name: frozenset(
            _CODE_NAMES[word]
            for word in re.findall(r"\b[A-Z_]{2,}\b", comment)
            if word in _CODE_NAMES
        )
        for name, comment in comments.items()
    }
    found = []
    for method in service.methods:
        assert method.name in documented, f"{method.name} has no comment in {proto}"
        found.append(
            Rpc(
                method.name,
                f"/{service.full_name}/{method.name}",
                method.input_type,
                method.server_streaming,
                documented[method.name] | COMMON_CODES | {grpc.StatusCode.OK},
                endless="until the client cancels" in comments[method.name],
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class Targets:
    """What the requests may name: the caller's space and the sessions that exist in it."""

    space_id: str
    session_ids: Sequence[str]
    other_space_id: str = "00000000-0000-4000-8000-00000000beef"


_WORDS = [
    "",
    " ",
    "x",
    "\x00",
    "a\x00b",
    MARKER,
    f"x{MARKER}y",
    "not-a-uuid",
    "00000000-0000-0000-0000-000000000000",
    "' OR 1=1 --",
    "{}",
    '{"q": 1}',
    "[1,2]",
    "not json",
    "null",
    "é" * 40,
    "🙂" * 20,
    "x" * 300,
]
_TEXT = st.one_of(st.sampled_from(_WORDS), st.text(max_size=12))
_INT32 = st.one_of(
    st.sampled_from([0, 1, -1, 5, 100, 1000, 1001, 2**31 - 1, -(2**31)]),
    st.integers(-(2**31), 2**31 - 1),
)
_INT64 = st.one_of(_INT32, st.sampled_from([2**63 - 1, -(2**63), 2**40]))
_UINT = st.integers(0, 2**32 - 1)
_FLOAT = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(math.nan))
_INT64_TYPES = (
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
)
_STRUCT_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), _FLOAT, _TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(_TEXT, children, max_size=3)
    ),
    max_leaves=6,
)


def _ids(targets: Targets) -> st.SearchStrategy[str]:
    known = st.sampled_from(list(targets.session_ids) or ["-"])
    return st.one_of(known, known, known, st.uuids().map(str), _TEXT)


def _strings(field_: FieldDescriptor, targets: Targets) -> st.SearchStrategy[str]:
    name = field_.name
    if name == "space_id":
        own = st.just(targets.space_id)
        return st.one_of(own, own, own, own, st.just(targets.other_space_id), _TEXT)
    if name == "id" or name.endswith(("_id", "_ids")):
        return _ids(targets)
    return _TEXT


@st.composite
def _struct(draw: st.DrawFn) -> struct_pb2.Struct:
    shape = draw(st.sampled_from(["json", "json", "deep", "nan", "nul"]))
    if shape == "deep":
        return nested_struct(draw(st.sampled_from([15, 16, 17, 20, 30])))
    struct = struct_pb2.Struct()
    if shape == "nan":
        struct.update({"n": math.nan})
    elif shape == "nul":
        struct.update({"k\x00": "v"} if draw(st.booleans()) else {"k": "v\x00"})
    else:
        value = draw(st.dictionaries(_TEXT, _JSON, max_size=3))
        struct.update(value)
    return struct


def _scalar(field_: FieldDescriptor, targets: Targets) -> st.SearchStrategy[Any]:
    kind = field_.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _strings(field_, targets)
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=80)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return _FLOAT
    if kind == FieldDescriptor.TYPE_ENUM:
        assert field_.enum_type is not None
        known = [v.number for v in field_.enum_type.values]
        return st.sampled_from([*known, 99, -1])
    if kind in (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return _INT64
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return _UINT
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    return _INT32


@st.composite
def message(draw: st.DrawFn, descriptor: Descriptor, targets: Targets, depth: int = 0) -> Message:
    """A `descriptor` message with a hostile selection of its fields set."""
    made = message_factory.GetMessageClass(descriptor)()
    for field_ in descriptor.fields:
        always = field_.name == "space_id"
        if depth > 3 or not (always or draw(st.integers(0, 9)) < 7):
            continue
        _set(draw, made, field_, targets, depth)
    return made


def _set(draw: st.DrawFn, made: Any, field_: FieldDescriptor, targets: Targets, depth: int) -> None:
    entry = field_.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key = _scalar(entry.fields_by_name["key"], targets)
        value_field = entry.fields_by_name["value"]
        for k, v in draw(st.dictionaries(key, _scalar(value_field, targets), max_size=2)).items():
            getattr(made, field_.name)[k] = v
        return
    if field_.is_repeated:
        count = draw(st.integers(0, 3))
        target = getattr(made, field_.name)
        for _ in range(count):
            if entry is None:
                target.append(draw(_scalar(field_, targets)))
            else:
                target.add().CopyFrom(draw(_sub(entry, targets, depth)))
        return
    if entry is None:
        setattr(made, field_.name, draw(_scalar(field_, targets)))
    else:
        getattr(made, field_.name).CopyFrom(draw(_sub(entry, targets, depth)))


def _sub(entry: Descriptor, targets: Targets, depth: int) -> st.SearchStrategy[Message]:
    if entry.full_name == "google.protobuf.Struct":
        return _struct()
    if entry.full_name in _STRUCT_TYPES:
        return st.just(message_factory.GetMessageClass(entry)())
    if entry.full_name == "google.protobuf.Timestamp":
        return st.builds(
            message_factory.GetMessageClass(entry),
            seconds=st.sampled_from([0, -62135596801, 253402300800, 2**40, 1_700_000_000]),
            nanos=st.sampled_from([0, 999_999_999, 1_000_000_000, -1]),
        )
    return message(entry, targets, depth + 1)


@st.composite
def request_bytes(draw: st.DrawFn, rpc: Rpc, targets: Targets) -> bytes:
    """A hostile request for `rpc` as the bytes that go on the wire."""
    made = draw(message(rpc.request, targets))
    data = made.SerializeToString()
    if MARKER.encode() in data and draw(st.booleans()):
        data = invalid_utf8(made)
    tail = draw(st.sampled_from([b""] * 8 + [b"\xff\xff\xff", b"\x0a\x05ab"]))
    return data + tail


@dataclass(slots=True)
class Outcome:
    """How one call ended."""

    code: grpc.StatusCode
    details: str


async def call(channel: grpc.aio.Channel, rpc: Rpc, data: bytes, metadata: Any) -> Outcome:
    """Send `data` to `rpc` as is; its final status."""
    try:
        if rpc.streaming:
            stream: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(rpc.path)
            replies = stream(data, metadata=metadata, timeout=30)
            try:
                async with asyncio.timeout(OPEN_FOR_S if rpc.endless else None):
                    async for _ in replies:
                        pass
            except TimeoutError:
                replies.cancel()  # still open and healthy: as good as OK
        else:
            unary: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(rpc.path)
            await unary(data, metadata=metadata, timeout=30)
    except grpc.aio.AioRpcError as error:
        return Outcome(error.code(), error.details() or "")
    return Outcome(grpc.StatusCode.OK, "")


class LogWatch(logging.Handler):
    """Collects every record with a traceback or at ERROR and above (installed on the root
    logger while a fuzz test runs)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.bad: list[logging.LogRecord] = []

    def __enter__(self) -> LogWatch:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None or record.levelno >= logging.ERROR:
            self.bad.append(record)


_LEAKS = re.compile(r"Traceback|debug_error_string|Unexpected <class|asyncpg|Exception|Error\(")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
"""A value the message quotes (a repr): hypothesis draws text from our code's constants,
so a request may carry "asyncpg" and the message echo it (`got 'asyncpg'`)."""


def check(rpc: Rpc, outcome: Outcome) -> None:
    """The answer is a documented code and its text carries no internals."""

    assert outcome.code in rpc.codes, f"{rpc.name} answered {outcome.code.name}: {outcome.details}"
    said = _QUOTED.sub("'…'", outcome.details)  # the request's own values, echoed
    assert not _LEAKS.search(said), f"{rpc.name} leaked: {outcome.details}"
