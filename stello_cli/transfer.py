"""export and import: a session's whole subtree to a file and back.

The JSON file (``stello export SESSION``) is::

    {"stello_export": 1, "exported_at": "...Z", "sessions": [
      {"id": "...", "parent_id": "..." or null, "source_session_id": "..." or null,
       "label": "...", "status": "active", "turn_count": 2,
       "config": {"system_prompt": "...", "skills": [...]} or null,
       "system_prompt": ... , "memory": ..., "insight": ... (each a string or null),
       "metadata": {"key": "value", ...},
       "inherits": {"from": "<id>", "until_seq": 4, "count": 4},   (only when by reference)
       "records": [{"seq": 1, "role": "user", "content": "...", "tool_calls": [...],
                    "tool_call_id": null, "created_at": "...Z", "metadata": {...}}, ...]},
      ...]}

Sessions come parents first (pre-order). A fork whose first records are what a
Fork INHERIT from its source (in the same file) gives keeps only its own
records and ``inherits``: the source's records through ``until_seq`` (the
``count``-th of them). `stello import FILE` recreates the subtree through the
gateway's ImportSession, one session per call, parents, earlier siblings and
sources first; such a fork is imported by reference to its re-imported source,
through the mechanism of a Fork INHERIT. Importing the same file again within
24 h answers the sessions of the first import (each call carries a request id
made from the file and the session), so an interrupted import finishes when run
again. ``--format markdown`` writes a page for reading (not for import).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli.exports import FORMAT_VERSION, inherited_prefix, markdown, record_from_dict
from stello_cli.gateway import gateway, session_id
from stello_cli.parser import Commands, session_argument
from stello_cli.style import plural, write
from stello_cli.talk import all_records
from stello_cli.views import tree_nodes
from stello_client import dicts
from stello_client.errors import ClientError, rpc_error_line

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient

FETCH_CALLS = 8
STATUSES: dict[str, Literal["active", "archived"]] = {
    "active": "active",
    "archived": "archived",
}


async def _fetch(
    client: AsyncClient, nodes: Sequence[common_pb2.TreeNode]
) -> list[tuple[agent_pb2.SessionView, list[common_pb2.Record]]]:
    """Every session's joined view and records, a few sessions at a time."""
    gate = asyncio.Semaphore(FETCH_CALLS)

    async def one(
        node: common_pb2.TreeNode,
    ) -> tuple[agent_pb2.SessionView, list[common_pb2.Record]]:
        async with gate:
            view = await client.get_session(node.id)
            return view, await all_records(client, node.id)

    return list(await asyncio.gather(*(one(node) for node in nodes)))


def export_document(
    fetched: Sequence[tuple[agent_pb2.SessionView, list[common_pb2.Record]]],
) -> dict[str, Any]:
    """The JSON document of fetched sessions (pre-order), forks by reference where possible."""
    records_of = {view.node.id: records for view, records in fetched}
    sessions = []
    for view, records in fetched:
        entry = dicts.view_dict(view)
        for name in ("children", "refs", "updated_at"):
            entry.pop(name)
        source = entry["source_session_id"]
        cut = inherited_prefix(records, records_of[source]) if source in records_of else None
        if cut is not None:
            count, until_seq, position = cut
            entry["inherits"] = {"from": source, "until_seq": until_seq, "count": position}
            records = records[count:]
        entry["records"] = [dicts.record_dict(r) for r in records]
        sessions.append(entry)
    exported = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {"stello_export": FORMAT_VERSION, "exported_at": exported, "sessions": sessions}


async def cmd_export(args: argparse.Namespace) -> int:
    """Write a session's subtree as JSON (for import) or Markdown (for reading)."""
    async with gateway(args) as client:
        top = await session_id(client, args.session)
        fetched = await _fetch(client, await tree_nodes(client, top))
    if args.format == "markdown":
        text = markdown(fetched)
    else:
        text = json.dumps(export_document(fetched), ensure_ascii=False, indent=1) + "\n"
    if args.output and args.output != "-":
        await asyncio.to_thread(Path(args.output).write_text, text, encoding="utf-8")
        write(f"exported {plural(len(fetched), 'session')} to {args.output}", stream=sys.stderr)
    else:
        write(text, end="")
    return 0


def _load(path: str) -> tuple[list[dict[str, Any]], str]:
    """The sessions of an export file and a digest of it."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise ClientError(f"{path}: cannot read an export from it ({exc})") from None
    if raw.lstrip().startswith(b"#"):
        raise ClientError(
            f"{path}: this is a Markdown export; only JSON exports can be imported "
            "(`stello export SESSION > FILE` writes one)"
        )
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise ClientError(f"{path}: cannot read an export from it ({exc})") from None
    if not isinstance(document, dict) or document.get("stello_export") != FORMAT_VERSION:
        raise ClientError(
            f"{path}: not a Stello export (version {FORMAT_VERSION}): write one with "
            "`stello export SESSION > FILE`"
        )
    sessions = document.get("sessions")
    if not isinstance(sessions, list) or not all(isinstance(s, dict) for s in sessions):
        raise ClientError(f"{path}: `sessions` must be a list of objects")
    seen: set[str] = set()
    for number, session in enumerate(sessions, 1):
        named = session.get("id")
        if not isinstance(named, str) or not named:
            raise ClientError(
                f"{path}: session {number} of {len(sessions)} ({session.get('label')!r}) has no "
                "`id`: every session of an export needs its id (export the subtree again)"
            )
        if named in seen:
            raise ClientError(f"{path}: two sessions have the id {named}: export the subtree again")
        seen.add(named)
    return sessions, hashlib.sha256(raw).hexdigest()[:16]


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


async def _import_one(
    client: AsyncClient,
    entry: dict[str, Any],
    made: dict[str, str],
    parent: str | None,
    request_id: str,
) -> common_pb2.SessionSummary:
    """ImportSession of one file entry; `made` maps the file's ids to the new ones."""
    source = made.get(str(entry.get("source_session_id"))) or None
    inherits = entry.get("inherits")
    until = None
    if source and isinstance(inherits, dict) and int(inherits.get("count") or 0) > 0:
        until = await _seq_at(client, source, int(inherits["count"]))
    config = entry.get("config")
    try:
        frozen = dicts.config_from_dict(config) if isinstance(config, dict) else None
    except (ValueError, TypeError) as exc:
        raise ClientError(str(exc)) from None
    return await client.import_session(
        str(entry.get("label") or "Imported"),
        records=[record_from_dict(r) for r in entry.get("records") or []],
        parent_id=made.get(str(entry.get("parent_id"))) or parent or None,
        source_session_id=source,
        inherit_until_seq=until,
        status=STATUSES.get(str(entry.get("status")), "active"),
        config=frozen,
        turn_count=int(entry.get("turn_count") or 0),
        request_id=request_id,
        system_prompt=_text(entry, "system_prompt"),
        memory=_text(entry, "memory"),
        insight=_text(entry, "insight"),
        metadata=_metadata(entry),
    )


def _metadata(entry: dict[str, Any]) -> dict[str, str]:
    """The entry's metadata (absent in files exported before sessions had any)."""
    found = entry.get("metadata")
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise ClientError("a session's metadata must be an object of strings")
    return {str(key): str(value) for key, value in found.items()}


def _text(entry: dict[str, Any], name: str) -> str | None:
    """The entry's `name` as text; None when absent or null."""
    return None if entry.get(name) is None else str(entry[name])


async def _seq_at(client: AsyncClient, session: str, position: int) -> int:
    """The seq of a session's `position`-th record (1-based): one small ListRecords."""
    found = (await client.list_records(session, offset=position - 1, limit=1)).records
    if not found:
        raise ClientError(f"the imported source {session} has fewer than {position} records")
    return int(found[0].seq)


async def cmd_import(args: argparse.Namespace) -> int:
    """Recreate an exported subtree in the space (under --parent, else as new roots)."""
    from stello_client.exceptions import RpcError

    sessions, digest = _load(args.file)
    started = datetime.now(UTC)
    replayed = True
    async with gateway(args) as client:
        parent = await session_id(client, args.parent, "--parent") if args.parent else None
        made: dict[str, str] = {}
        order = import_order(sessions)
        for count, position in enumerate(order, 1):
            entry = sessions[position]
            old = str(entry.get("id") or position)
            request_id = f"import:{digest}:{parent or 'root'}:{old}"
            try:
                session = await _import_one(client, entry, made, parent, request_id)
            except RpcError as err:
                line = rpc_error_line(err, client.gateway, args.flags)
                raise ClientError(f"{_which(entry, count, len(order))}: {line}") from None
            except ClientError as exc:
                raise ClientError(f"{_which(entry, count, len(order))}: {exc}") from None
            made[old] = session.id
            created = dicts.when(session.created_at)
            replayed = replayed and created is not None and created < started
        tops = [made[str(s.get("id"))] for s in sessions if str(s.get("parent_id")) not in made]
        originals = not replayed and await _present(client, [str(s["id"]) for s in sessions])
    if args.json:
        write(dicts.dumps({"imported": made, "again": replayed, "copies": originals}))
    else:
        write(import_line(len(made), tops, replayed=replayed, copies=originals))
    return 0


async def _present(client: AsyncClient, ids: Sequence[str]) -> bool:
    """True when the file's first session is still in the space (the import made copies)."""
    from stello_client.exceptions import RpcError

    try:
        await client.get_session(ids[0])
    except RpcError:
        return False
    return True


def import_line(count: int, tops: Sequence[str], *, replayed: bool, copies: bool) -> str:
    """What an import did: new sessions, copies beside the originals, or nothing new."""
    top = ", ".join(tops)
    if replayed:
        return (
            f"this file was imported before: nothing new was made; its "
            f"{plural(count, 'session')} are under {top}"
        )
    if copies:
        return (
            f"imported {plural(count, 'session')} as copies (the exported sessions are still in "
            f"this space); the new top: {top}"
        )
    return f"imported {plural(count, 'session')}; top: {top}"


def _which(entry: dict[str, Any], count: int, total: int) -> str:
    return f"importing session {count} of {total} ({entry.get('label')!r})"


def register(commands: Commands) -> None:
    """Add export and import."""
    export = commands.client(
        "export",
        cmd_export,
        "write a session and its subtree to a file (JSON to import, or Markdown to read)",
    )
    session_argument(export)
    export.add_argument(
        "--format", choices=["json", "markdown"], default="json", help="default json"
    )
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default stdout)")
    imported = commands.client(
        "import",
        cmd_import,
        "recreate an exported subtree in the space (records, configs, slots, topology)",
        flags={"parent_id": "--parent"},
    )
    imported.add_argument("file", metavar="FILE", help="a file of `stello export` (- = stdin)")
    imported.add_argument(
        "--parent", metavar="SESSION", help="place the subtree under SESSION (default: a root)"
    )
