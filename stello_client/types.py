"""The types the SDK's methods take and answer: the gateway's generated messages.

Results are the generated protobuf messages, not copies of them: they are the
wire contract (DESIGN §2.1), a field the protos gain is there the moment the
stubs are regenerated, nothing is converted twice, and their ``.pyi`` stubs
type every field for mypy. What protobuf makes awkward the SDK takes in plain
Python: enums as short names (``context="inherit"``, ``status="archived"``,
``role="user"``, ``kinds=["records_appended"]``), skills as a list of names,
tool definitions from a dict (`tool`). `stello_client.dicts` turns replies
into plain dicts for JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar, Unpack

from google.protobuf import message, struct_pb2

from stello.agent.v1.agent_pb2 import (
    ApplyRetentionResponse,
    ConsolidateResponse,
    GetLineageResponse,
    ListRecordsResponse,
    ListSessionDigestsResponse,
    ListSharedMemoryResponse,
    ProfileInfo,
    SearchRecordsResponse,
    SearchSessionsResponse,
    SendResponse,
    SessionView,
    SkillInfo,
    SubmitToolResultsResponse,
    TextDelta,
    ToolResult,
    UpsertSharedMemoryEntryResponse,
    Usage,
    WhoAmIResponse,
)
from stello.common.v1 import common_pb2
from stello.common.v1.common_pb2 import (
    BusyPolicy,
    EventKind,
    ForkContext,
    Record,
    RecordHit,
    RecordRole,
    RetentionAction,
    RetentionPolicy,
    SearchOrder,
    SessionConfig,
    SessionDigest,
    SessionMeta,
    SessionStatus,
    SessionSummary,
    SharedMemoryEntry,
    SpaceEvent,
    ToolCall,
    ToolDefinition,
    TreeNode,
)
from stello.enum_words import enum_words, one_of
from stello_client.errors import shown

ContextName: TypeAlias = Literal["none", "inherit", "compress"]
BusyName: TypeAlias = Literal["reject", "enqueue", "interrupt", "rollback"]
StatusName: TypeAlias = Literal["active", "archived"]
StatusFilter: TypeAlias = Literal["active", "archived", "all"]
RoleName: TypeAlias = Literal["system", "user", "assistant", "tool"]
OrderName: TypeAlias = Literal["newest", "relevance"]
StreamEvent: TypeAlias = TextDelta | ToolCall | SendResponse
"""What `stream()` yields: text as it arrives, each complete tool call, then the turn."""
ToolResultsStreamEvent: TypeAlias = TextDelta | ToolCall | SubmitToolResultsResponse
"""What `submit_tool_results_stream()` yields: text as it arrives, each complete tool call,
then the continuation as `submit_tool_results` answers it."""

__all__ = [
    "ApplyRetentionResponse",
    "BusyName",
    "BusyPolicy",
    "ConsolidateResponse",
    "ContextName",
    "DigestFilter",
    "EventKind",
    "ForkContext",
    "GetLineageResponse",
    "ListRecordsResponse",
    "ListSessionDigestsResponse",
    "ListSharedMemoryResponse",
    "OrderName",
    "ProfileInfo",
    "Record",
    "RecordHit",
    "RecordRole",
    "RetentionAction",
    "RetentionPolicy",
    "RoleName",
    "SearchOrder",
    "SearchRecordsResponse",
    "SearchSessionsResponse",
    "SendResponse",
    "SessionConfig",
    "SessionDigest",
    "SessionMeta",
    "SessionStatus",
    "SessionSummary",
    "SessionView",
    "SharedMemoryEntry",
    "SkillInfo",
    "SpaceEvent",
    "StatusFilter",
    "StatusName",
    "StreamEvent",
    "SubmitToolResultsResponse",
    "TextDelta",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "ToolResultsStreamEvent",
    "TreeNode",
    "UpsertSharedMemoryEntryResponse",
    "Usage",
    "WhoAmIResponse",
    "busy_policy",
    "event_kind",
    "fork_context",
    "record_role",
    "search_order",
    "session_status",
    "status_filter",
    "tool",
    "tool_result",
]


def _enum(enum: Any, prefix: str, value: str | int | None, what: str) -> Any:
    """The enum value of a short name (``inherit``), a full one, or a number; 0 for None.

    Raises:
        TypeError: neither a name nor a number (a list, a float, bytes), naming `what`.
        ValueError: a name or number the enum does not have, naming `what` and listing
            the names in the gateway's words (`stello.enum_words`, which the kernel's
            `not_one_of` words its refusals with; it imports no grpc).
    """
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        if value in enum.values():
            return value
    elif not isinstance(value, str):
        raise TypeError(f"{what}: not a value this field holds, got {shown(value)}")
    else:
        name = value.upper()
        name = name if name.startswith(prefix) else prefix + name
        if name in enum.keys():
            return enum.Value(name)
    raise ValueError(f"{what}: {one_of(enum_words(enum.keys()), repr(value))}")


def fork_context(value: ContextName | ForkContext | None) -> ForkContext:
    """ForkContext of "none", "inherit", "compress" (None: the profile's, else none)."""
    found: ForkContext = _enum(common_pb2.ForkContext, "FORK_CONTEXT_", value, "context")
    return found


def session_status(value: StatusName | SessionStatus | None) -> SessionStatus:
    """SessionStatus of "active" or "archived" (None: no filter)."""
    found: SessionStatus = _enum(common_pb2.SessionStatus, "SESSION_STATUS_", value, "status")
    return found


def status_filter(value: StatusFilter | SessionStatus | None) -> SessionStatus:
    """SessionStatus a listing or search keeps: "active", "archived", or "all" (as None:
    both; the CLI's `--status all`, so a value read from one passes to the other)."""
    if isinstance(value, str) and value.lower() == "all":
        return common_pb2.SESSION_STATUS_UNSPECIFIED
    try:
        found: SessionStatus = _enum(common_pb2.SessionStatus, "SESSION_STATUS_", value, "status")
    except ValueError:
        words = [*enum_words(common_pb2.SessionStatus.keys()), "all"]
        raise ValueError(f"status: {one_of(words, repr(value))}") from None
    return found


def record_role(value: RoleName | RecordRole | None) -> RecordRole:
    """RecordRole of "system", "user", "assistant" or "tool" (None: no filter)."""
    found: RecordRole = _enum(common_pb2.RecordRole, "RECORD_ROLE_", value, "role")
    return found


def search_order(value: OrderName | SearchOrder | None) -> SearchOrder:
    """SearchOrder of "newest" or "relevance" (None: newest)."""
    found: SearchOrder = _enum(common_pb2.SearchOrder, "SEARCH_ORDER_", value, "order")
    return found


def busy_policy(value: BusyName | BusyPolicy | None) -> BusyPolicy:
    """BusyPolicy of "reject", "enqueue", "interrupt" or "rollback" (None: reject)."""
    found: BusyPolicy = _enum(common_pb2.BusyPolicy, "BUSY_POLICY_", value, "busy")
    return found


def event_kind(value: str | EventKind, what: str = "kind") -> EventKind:
    """EventKind of a short name ("records_appended") or the full one; `what` names the
    argument in an error (`kinds[1]`)."""
    found: EventKind = _enum(common_pb2.EventKind, "EVENT_KIND_", value, what)
    return found


def tool(
    name: str, description: str = "", parameters: Mapping[str, Any] | None = None
) -> ToolDefinition:
    """A client tool the model may call: its name, what it does, its JSON schema.

    Raises:
        TypeError: a value its argument cannot hold, naming it: `parameters` not a dict,
            or holding what JSON has not (a set, a datetime), naming the place in it.
    """
    from stello_client.requests import request_of  # it builds on this module

    schema = struct_pb2.Struct()
    given: Mapping[str, Any] = parameters or {"type": "object", "properties": {}}
    if not isinstance(given, Mapping):
        raise TypeError(f"parameters: expected a JSON schema as a dict, got {shown(given)}")
    _check_json(given, "")
    schema.update(dict(given))
    return request_of(ToolDefinition, name=name, description=description, parameters=schema)


JSON_SCALARS = (str, int, float, bool, type(None))


def _check_json(value: Any, path: str) -> None:
    """`value` (at `path` in a tool's parameters) holds only what JSON has.

    Raises:
        TypeError: it holds something else, or a key that is not a str, naming the place.
    """
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                where = f" {path}" if path else ""
                raise TypeError(
                    f"parameters:{where} holds the key {shown(key)}, which JSON has not (its "
                    "keys are str)"
                )
            _check_json(item, f"{path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]")
    elif not isinstance(value, JSON_SCALARS):
        raise TypeError(
            f"parameters: {path} holds {shown(value)}, which JSON has not (a schema holds "
            "dicts, lists, str, numbers, bool and None)"
        )


def tool_result(tool_call_id: str, content: str, *, is_error: bool = False) -> ToolResult:
    """The answer to one tool call (`is_error`: the tool failed; `content` says how).

    Raises:
        TypeError: a value its argument cannot hold, naming it.
    """
    from stello_client.requests import request_of  # it builds on this module

    return request_of(ToolResult, tool_call_id=tool_call_id, content=content, is_error=is_error)


def skill_list(names: Sequence[str] | None) -> common_pb2.SkillList | None:
    """A SkillList of names (None: unset, inherit; [] = no skills).

    Raises:
        TypeError: `names` is one name, not a list of them (see `several`).
    """
    return None if names is None else common_pb2.SkillList(names=several("skills", names))


Item = TypeVar("Item")


def several(name: str, values: Iterable[Item]) -> list[Item]:
    """The value of keyword `name`, which takes several values, as a list.

    Raises:
        TypeError: one value where a list is expected, naming `name`: a str (which
            would be split into its characters: `remove="team"` would remove the keys
            "t", "e", "a" and "m"), bytes or a message (one tool, one record), or no
            sequence at all.
    """
    if isinstance(values, str | bytes | message.Message) or not isinstance(values, Iterable):
        raise TypeError(f"{name}: expected a list, got one value {shown(values)}: wrap it in [...]")
    return list(values)


class DigestFilter(TypedDict, total=False):
    """ListSessionDigests' filters (common.proto's SessionFilter), each served by an index."""

    metadata: Mapping[str, str]
    label_prefix: str
    parent_id: str
    root_id: str
    roots_only: bool
    created_after: datetime
    created_before: datetime
    updated_after: datetime
    updated_before: datetime


_TIMES = ("created_after", "created_before", "updated_after", "updated_before")
_TEXTS = ("label_prefix", "parent_id", "root_id")


def session_filter(**filters: Unpack[DigestFilter]) -> common_pb2.SessionFilter:
    """The SessionFilter message of the given filters (times as timezone-aware datetimes;
    None: that filter unset).

    Raises:
        TypeError: a filter no listing has (a misspelt one would list everything), or a
            value not of its filter's type, naming the filter: a naive datetime too (which
            protobuf reads as UTC, hours off a local time, without a word).
    """
    message = common_pb2.SessionFilter()
    for name, value in filters.items():
        if name not in DigestFilter.__annotations__:
            known = ", ".join(DigestFilter.__annotations__)
            raise TypeError(f"{name}: no such filter; the filters are {known}")
        if value is not None and not _set_filter(message, name, value):
            raise TypeError(f"{name}: not a value this filter holds, got {shown(value)}")
    return message


def _set_filter(message: common_pb2.SessionFilter, name: str, value: object) -> bool:
    """Set filter `name` to `value`; False when the value is not of its type."""
    if name == "metadata":
        if not isinstance(value, Mapping) or not all(
            isinstance(key, str) and isinstance(item, str) for key, item in value.items()
        ):
            return False
        message.metadata.update(value)
    elif name in _TEXTS:
        if not isinstance(value, str):
            return False
        setattr(message, name, value)
    elif name == "roots_only":
        if not isinstance(value, bool):
            return False
        message.roots_only = value
    else:  # one of _TIMES
        if not isinstance(value, datetime):
            return False
        if value.utcoffset() is None:
            raise TypeError(
                f"{name}: not a value this filter holds, got {shown(value)}: a timezone-aware "
                "datetime (a naive one would be read as UTC, not as local time): "
                "datetime.now(UTC), or .astimezone() for local time"
            )
        getattr(message, name).FromDatetime(value)
    return True
