"""export and import: a session's whole subtree to a file and back.

The JSON file (``stello export SESSION``) is::

    {"stello_export": 1, "exported_at": "...Z", "sessions": [
      {"id": "...", "parent_id": "..." or null, "source_session_id": "..." or null,
       "label": "...", "status": "active", "turn_count": 2, "pinned": false,
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
``count``-th of them); a fork by reference is read as such, its own records only
(`export_reads`). `stello import FILE` recreates the subtree through the
gateway's ImportSession, one session per call, parents, earlier siblings and
sources first; such a fork is imported by reference to its re-imported source,
through the mechanism of a Fork INHERIT. Importing the same file again within
24 h answers the sessions of the first import (each call carries a request id
made from the file and the session), so an interrupted import finishes when run
again; where those sessions were deleted since, it imports them anew (only those,
under the first import's top, when some of them remain). The whole file is checked
(format, and the limits every gateway keeps: labels, metadata, tool calls) before
the first call, and a call refused later deletes what the
run made (`Importer.undo`). ``--format markdown`` writes a page for reading (not
for import).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.formats.file_names import shown_name
from stello_cli.gateway import gateway, session_id
from stello_cli.output.style import plural, write
from stello_cli.parser import Commands, session_argument
from stello_cli.space.views import tree_nodes
from stello_cli.transfer.export_reads import FETCH_CALLS, Inherits, Read, read_for_export
from stello_cli.transfer.exports import (
    FORMAT_VERSION,
    inherited_prefix,
    markdown,
)
from stello_cli.transfer.import_file import import_order, load, plans, which
from stello_cli.transfer.importer import Importer
from stello_cli.turns.talk import all_records
from stello_client import dicts
from stello_client.connection.flags import file_name
from stello_client.errors import ClientError, rpc_error_line

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient


async def _fetch(
    client: AsyncClient, nodes: Sequence[common_pb2.TreeNode]
) -> list[tuple[agent_pb2.SessionView, list[common_pb2.Record]]]:
    """Every session's joined view and all its records, a few sessions at a time."""
    gate = asyncio.Semaphore(FETCH_CALLS)

    async def one(
        node: common_pb2.TreeNode,
    ) -> tuple[agent_pb2.SessionView, list[common_pb2.Record]]:
        async with gate:
            view = await client.get_session(node.id)
            return view, await all_records(client, node.id)

    return list(await asyncio.gather(*(one(node) for node in nodes)))


def export_document(reads: Sequence[Read]) -> dict[str, Any]:
    """The JSON document of sessions read for it (pre-order), forks by reference where
    possible."""
    whole = {read.view.node.id: read.records for read in reads if read.own_after is None}
    sessions = []
    for read in reads:
        entry = dicts.view_dict(read.view)
        for name in ("children", "refs", "updated_at"):
            entry.pop(name)
        records = read.records
        source = entry["source_session_id"]
        inherits = read.inherits
        if inherits is None and source in whole and not read.copies:
            cut = inherited_prefix(records, whole[source])
            if cut is not None:
                count, until_seq, position = cut
                inherits = Inherits(source, until_seq, position)
                records = records[count:]
        if inherits is not None:
            entry["inherits"] = {
                "from": inherits.source,
                "until_seq": inherits.until_seq,
                "count": inherits.count,
            }
        entry["records"] = [dicts.record_dict(r) for r in records]
        sessions.append(entry)
    exported = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {"stello_export": FORMAT_VERSION, "exported_at": exported, "sessions": sessions}


async def cmd_export(args: argparse.Namespace) -> int:
    """Write a session's subtree as JSON (for import) or Markdown (for reading)."""
    to_file = bool(args.output) and args.output != "-"
    if to_file and not await asyncio.to_thread(_folder_exists, args.output):
        raise ClientError(f"-o {shown_name(args.output)}: no such folder to write the export in")
    async with gateway(args) as client:
        top = await session_id(client, args.session)
        nodes = await tree_nodes(client, top)
        if args.format == "markdown":
            text = markdown(await _fetch(client, nodes))
        else:
            document = export_document(await read_for_export(client, nodes))
            text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
    if to_file:
        try:
            await asyncio.to_thread(Path(args.output).write_text, text, encoding="utf-8")
        except OSError as exc:
            said = f"-o {shown_name(args.output)}: cannot write the export ({exc.strerror})"
            raise ClientError(said) from None
        said = f"exported {plural(len(nodes), 'session')} to {shown_name(args.output)}"
        write(said, stream=sys.stderr)
    else:
        write(text, end="")
    return 0


def _folder_exists(path: str) -> bool:
    """True when the folder a file at `path` would go in exists (checked before fetching)."""
    return Path(path).resolve().parent.is_dir()


async def cmd_import(args: argparse.Namespace) -> int:
    """Recreate an exported subtree in the space (under --parent, else as new roots).

    The whole file is checked before the first call; a call refused later deletes what
    this run made, so a failed import leaves the space as it was. --json: {"imported": the
    file's ids to the sessions that stand for them, "again": an earlier import answered
    every one, "copies": made beside the exported sessions, "made_now": the file's ids
    this run made (all of them, none when "again", or those of a partial re-import: the
    sessions an interrupted first import had not made, and those deleted since it),
    "made_again": those of "made_now" deleted since an earlier import made them}.
    """
    from stello_client.exceptions import RpcError

    sessions, digest = load(args.file)
    order = import_order(sessions)
    planned = plans(sessions, order)
    async with gateway(args) as client:
        parent = await session_id(client, args.parent, "--parent") if args.parent else None
        if parent is not None:  # one that is no session fails as --parent's, before any import
            await client.get_session(parent)
        run = Importer(client, digest, parent, datetime.now(UTC))
        for count, position in enumerate(order, 1):
            entry = sessions[position]
            try:
                await run.one(entry, planned[position])
            except (RpcError, ClientError) as exc:
                line = (
                    rpc_error_line(exc, client.gateway, args.flags)
                    if isinstance(exc, RpcError)
                    else str(exc)
                )
                done = await run.undo(exc)
                raise ClientError(f"{which(entry, count, len(order))}: {line}{done}") from None
        made = run.made
        tops = [made[str(s.get("id"))] for s in sessions if str(s.get("parent_id")) not in made]
        whole = len(run.fresh) == len(made)  # not the rest of a partly deleted first import
        originals = whole and await _present(client, [str(s["id"]) for s in sessions])
    if args.json:
        answer = {
            "imported": made,
            "again": run.replayed,
            "copies": originals,
            "made_now": run.made_now(),
            "made_again": run.made_again(),
        }
        write(dicts.dumps(answer))
    else:
        write(
            import_line(
                len(made),
                tops,
                made_now=len(run.fresh),
                made_again=len(run.remade),
                copies=originals,
            )
        )
    return 0


async def _present(client: AsyncClient, ids: Sequence[str]) -> bool:
    """True when the file's first session is still in the space (the import made copies)."""
    from stello_client.exceptions import RpcError

    try:
        await client.get_session(ids[0])
    except RpcError:
        return False
    return True


def import_line(
    count: int, tops: Sequence[str], *, made_now: int, copies: bool, made_again: int = 0
) -> str:
    """What an import did: new sessions, copies beside the originals, nothing new, or the
    rest of an earlier import (`made_now` of `count`): the sessions it had made that were
    deleted since made again (`made_again` of them), and those it had not made (it was
    interrupted) made now."""
    top = ", ".join(tops)
    if not made_now:
        return (
            f"this file was imported before: nothing new was made; its "
            f"{plural(count, 'session')} are under {top}"
        )
    if made_now < count:
        sessions = plural(count, "session")
        unmade = made_now - made_again
        deleted = f"had been deleted since and {_were(made_again)} made again"
        if not unmade:
            return (
                f"this file was imported before; {made_now} of its {sessions} {deleted}, "
                f"under {top}"
            )
        if not made_again:
            return (
                f"this file was imported before but not finished; the {made_now} of its "
                f"{sessions} it had not made {_were(made_now)} made now, under {top}"
            )
        return (
            f"this file was imported before; of its {sessions}, {made_again} {deleted}, and "
            f"{unmade} it had not made {_were(unmade)} made now, under {top}"
        )
    if copies:
        return (
            f"imported {plural(count, 'session')} as copies (the exported sessions are still in "
            f"this space); the new top: {top}"
        )
    return f"imported {plural(count, 'session')}; top: {top}"


def _were(count: int) -> str:
    return "was" if count == 1 else "were"


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
    export.add_argument(
        "-o", "--output", type=file_name, metavar="FILE", help="write here (default stdout)"
    )
    imported = commands.client(
        "import",
        cmd_import,
        "recreate an exported subtree in the space (records, configs, slots, topology)",
        # The file's fields keep their names (a label in the file is no --label flag).
        flags={"parent_id": "--parent", "label": "label", "system_prompt": "system_prompt"},
    )
    imported.add_argument(
        "file", type=file_name, metavar="FILE", help="a file of `stello export` (- = stdin)"
    )
    imported.add_argument(
        "--parent", metavar="SESSION", help="place the subtree under SESSION (default: a root)"
    )
