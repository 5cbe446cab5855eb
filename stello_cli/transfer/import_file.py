"""`stello import`'s reading of an export file (the format: `stello_cli.transfer.commands`):
the file loaded and checked whole, the order its sessions are imported in, and each session planned
(checked and converted for ImportSession) before the first call.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from stello.common.v1 import common_pb2
from stello.formats import json_text
from stello.formats.file_names import shown_name
from stello_cli.output.style import read_stdin
from stello_cli.parser import MAX_INT32
from stello_cli.transfer.exports import (
    FORMAT_VERSION,
    record_from_dict,
    text_field,
)
from stello_client import dicts
from stello_client.errors import ClientError, shown

if TYPE_CHECKING:
    pass


STATUSES: dict[str, Literal["active", "archived"]] = {
    "active": "active",
    "archived": "archived",
}


def load(file: str) -> tuple[list[dict[str, Any]], str]:
    """The sessions of an export file and a digest of it; its name in messages as
    `shown_name` prints it."""
    path = shown_name(file)
    try:
        raw = read_stdin(sys.stdin.buffer.read) if file == "-" else Path(file).read_bytes()
    except OSError as exc:  # its text repeats the name, as a repr (not-UTF-8 bytes as \udcff)
        said = exc.strerror or exc
        raise ClientError(f"{path}: cannot read an export from it ({said})") from None
    if raw.lstrip().startswith(b"#"):
        raise ClientError(
            f"{path}: this is a Markdown export; only JSON exports can be imported "
            "(`stello export SESSION > FILE` writes one)"
        )
    try:
        document = json_text.loads(raw)
    except ValueError as exc:  # not JSON, or nested past what Python's json reads
        raise ClientError(f"{path}: cannot read an export from it ({exc})") from None
    if not isinstance(document, dict) or document.get("stello_export") != FORMAT_VERSION:
        raise ClientError(
            f"{path}: not a Stello export (version {FORMAT_VERSION}): write one with "
            "`stello export SESSION > FILE`"
        )
    sessions = document.get("sessions")
    if not isinstance(sessions, list) or not all(isinstance(s, dict) for s in sessions):
        raise ClientError(f"{path}: `sessions` must be a list of objects")
    if not sessions:
        raise ClientError(f"{path}: the export holds no session: nothing to import")
    seen: set[str] = set()
    for number, session in enumerate(sessions, 1):
        named = session.get("id")
        if not isinstance(named, str) or not named:
            raise ClientError(
                f"{path}: {nth(session, number, len(sessions))} has no "
                "`id`: every session of an export needs its id (export the subtree again)"
            )
        if named in seen:
            raise ClientError(f"{path}: two sessions have the id {named}: export the subtree again")
        seen.add(named)
        for link in ("parent_id", "source_session_id"):
            try:
                text_field(session, link)
            except ClientError as exc:
                which = nth(session, number, len(sessions))
                raise ClientError(f"{path}: {which}: {exc}") from None
    _check_parents(path, sessions)
    _check_inherits(path, sessions)
    return sessions, hashlib.sha256(raw).hexdigest()[:16]


def _check_inherits(path: str, sessions: Sequence[dict[str, Any]]) -> None:
    """A session that inherits records names its source, a session of the file: else
    its inherited records would be lost without a word (an export writes `inherits`
    only for a source it holds)."""
    ids = {s["id"] for s in sessions}
    for number, session in enumerate(sessions, 1):
        inherits = session.get("inherits")
        if not isinstance(inherits, dict) or not inherits.get("count"):
            continue
        source = session.get("source_session_id")
        if source not in ids or inherits.get("from", source) != source:
            raise ClientError(
                f"{path}: {nth(session, number, len(sessions))}: "
                "inherits.from must be its source_session_id, a session of the file: export "
                "the subtree again"
            )


def _check_parents(path: str, sessions: Sequence[dict[str, Any]]) -> None:
    """Every session's parents lead out of the file: no cycle (which no export has)."""
    parent_of = {s["id"]: s.get("parent_id") for s in sessions}
    for number, session in enumerate(sessions, 1):
        seen = {session["id"]}
        above = parent_of.get(session["id"])
        while above in parent_of:
            if above in seen:
                raise ClientError(
                    f"{path}: {nth(session, number, len(sessions))}: "
                    "its parent_id leads round in a circle: export the subtree again"
                )
            seen.add(above)
            above = parent_of[above]


def import_order(sessions: Sequence[dict[str, Any]]) -> list[int]:
    """Positions in the order to import: parents, earlier siblings and sources first.

    Parents and siblings come in file order (pre-order) anyway; a source may sit
    later in the file (a fork placed elsewhere with --parent). A source that
    cannot come first (a cycle, which no real export has: every session was made
    after its source) is cut from its fork, which then keeps its own copy.
    """
    index = {s.get("id"): i for i, s in enumerate(sessions)}
    needs: list[set[int]] = [set() for _ in sessions]
    source_of: dict[int, int] = {}
    last_child: dict[int, int] = {}
    for i, session in enumerate(sessions):
        parent = index.get(session.get("parent_id"))
        if parent is not None:
            needs[i] |= {parent, last_child.get(parent, parent)}
            last_child[parent] = i
        source = index.get(session.get("source_session_id"))
        if source is not None and source != i:
            needs[i].add(source)
            source_of[i] = source
    order: list[int] = []
    while len(order) < len(sessions):
        done = set(order)
        ready = [i for i in range(len(sessions)) if i not in done and needs[i] <= done]
        if ready:
            order.append(ready[0])
            continue
        stuck = min(i for i in source_of if i not in done and source_of[i] not in done)
        needs[stuck].discard(source_of.pop(stuck))
        _copy_instead(sessions[stuck])
    return order


def _copy_instead(entry: dict[str, Any]) -> None:
    """Cut a fork from its source; with `inherits` its records cannot come back: refuse."""
    if entry.get("inherits"):
        raise ClientError(
            f"session {entry.get('id')} inherits from a source that cannot be imported before "
            "it; export the subtree again"
        )
    entry["source_session_id"] = None


@dataclass(frozen=True, slots=True)
class Planned:
    """One session of the file, checked and converted before anything is imported."""

    label: str
    records: list[common_pb2.Record]
    status: Literal["active", "archived"]
    config: common_pb2.SessionConfig | None
    turn_count: int
    system_prompt: str | None
    memory: str | None
    insight: str | None
    metadata: dict[str, str]
    inherit_count: int
    pinned: bool


def plan(entry: dict[str, Any]) -> Planned:
    """`entry` checked and converted for ImportSession.

    Raises:
        ClientError: a field is not what an export holds (the message names it).
    """
    return Planned(
        label=text_field(entry, "label") or "Imported",
        records=_records(entry.get("records")),
        status=_status(entry.get("status")),
        config=_config(entry.get("config")),
        turn_count=_count("turn_count", entry.get("turn_count")),
        system_prompt=text_field(entry, "system_prompt"),
        memory=text_field(entry, "memory"),
        insight=text_field(entry, "insight"),
        metadata=_metadata(entry.get("metadata")),
        inherit_count=_inherit_count(entry.get("inherits")),
        pinned=_pinned(entry.get("pinned")),
    )


def plans(sessions: Sequence[dict[str, Any]], order: Sequence[int]) -> dict[int, Planned]:
    """Every session of the file planned, in import order, before the first call."""
    planned: dict[int, Planned] = {}
    for count, position in enumerate(order, 1):
        try:
            planned[position] = plan(sessions[position])
            _within_limits(planned[position])
        except ClientError as exc:
            raise ClientError(f"{which(sessions[position], count, len(order))}: {exc}") from None
    return planned


def _within_limits(planned: Planned) -> None:
    """The per-field limits ImportSession checks that hold whatever the deployment's
    settings (label, metadata, tool calls), checked by the same kernel code, so a file is
    refused before its first session is made, not after (sizes in bytes are the gateway's
    settings: it alone checks those).

    Raises:
        ClientError: the fields that break them, named as the file names them.
    """
    from stello import validation
    from stello.errors import Violations, listed
    from stello.rules import metadata

    found = Violations()
    validation.label(planned.label, found)
    metadata.check_pairs(planned.metadata, found, "metadata")
    for number, record in enumerate(planned.records):
        for call_number, call in enumerate(record.tool_calls):
            path = f"records[{number}].tool_calls[{call_number}]"
            validation.tool_call(call.id, call.name, call.arguments_json, path, found)
        validation.record_message_tools(record, f"records[{number}]", found)
    if found.items:
        raise ClientError(listed(found.items))


def _records(found: Any) -> list[common_pb2.Record]:
    if found is None:
        return []
    if not isinstance(found, list):
        raise ClientError(f"records: must be a list of records, got {shown(found)}")
    records = []
    for number, value in enumerate(found):
        if not isinstance(value, dict):
            raise ClientError(f"records[{number}]: must be an object, got {shown(value)}")
        try:
            records.append(record_from_dict(value))
        except ClientError as exc:
            raise ClientError(f"records[{number}].{exc}") from None
    return records


def _status(found: Any) -> Literal["active", "archived"]:
    if found is None:
        return "active"
    if found not in STATUSES:
        raise ClientError(f"status: must be one of {sorted(STATUSES)}, got {shown(found)}")
    return STATUSES[found]


def _config(found: Any) -> common_pb2.SessionConfig | None:
    if found is None:
        return None
    if not isinstance(found, dict):
        raise ClientError(f"config: must be an object or null, got {shown(found)}")
    for name, item in found.items():
        if name == "skills":
            if not isinstance(item, list) or not all(isinstance(s, str) for s in item):
                raise ClientError(f"config.skills: must be a list of names, got {shown(item)}")
        elif not isinstance(item, str):
            raise ClientError(f"config.{name}: must be text, got {shown(item)}")
    try:
        return dicts.config_from_dict(found)
    except ValueError as exc:
        raise ClientError(str(exc)) from None


def _count(name: str, found: Any) -> int:
    if found is None:
        return 0
    if isinstance(found, bool) or not isinstance(found, int) or not 0 <= found <= MAX_INT32:
        raise ClientError(
            f"{name}: must be a whole number from 0 to {MAX_INT32}, got {shown(found)}"
        )
    return found


def _metadata(found: Any) -> dict[str, str]:
    """The entry's metadata (absent in files exported before sessions had any)."""
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise ClientError(f"metadata: must be an object of text values, got {shown(found)}")
    for key, value in found.items():
        if not isinstance(value, str):
            raise ClientError(f"metadata[{key!r}]: must be text, got {shown(value)}")
    return dict(found)


def _pinned(found: Any) -> bool:
    if found is None:  # an export made before the field
        return False
    if not isinstance(found, bool):
        raise ClientError(f"pinned: must be true or false, got {shown(found)}")
    return found


def _inherit_count(found: Any) -> int:
    if found is None:
        return 0
    if not isinstance(found, dict):
        raise ClientError(f"inherits: must be an object or null, got {shown(found)}")
    text_field(found, "from")
    return _count("inherits.count", found.get("count"))


def nth(entry: dict[str, Any], number: int, total: int) -> str:
    """How a message names a session of the file: `session 2 of 4 ('Label')`, or
    `(no label)` for one without (not `(None)`)."""
    label = entry.get("label")
    return f"session {number} of {total} ({'no label' if label is None else shown(label)})"


def which(entry: dict[str, Any], count: int, total: int) -> str:
    return f"importing {nth(entry, count, total)}"
