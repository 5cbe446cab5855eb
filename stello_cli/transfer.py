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
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from stello import json_text
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli.export_reads import FETCH_CALLS, Inherits, Read, read_for_export
from stello_cli.exports import (
    FORMAT_VERSION,
    inherited_prefix,
    markdown,
    record_from_dict,
    text_field,
)
from stello_cli.gateway import gateway, session_id
from stello_cli.parser import MAX_INT32, Commands, session_argument
from stello_cli.style import plural, write
from stello_cli.talk import all_records
from stello_cli.views import tree_nodes
from stello_client import dicts
from stello_client.errors import ClientError, rpc_error_line, shown

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient

ERASED_TRIES = 20
"""Request ids tried for one session whose earlier imports were deleted since (a backup
restored that often within the 24 h its ids are kept)."""
STATUSES: dict[str, Literal["active", "archived"]] = {
    "active": "active",
    "archived": "archived",
}


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
        raise ClientError(f"-o {args.output}: no such folder to write the export in")
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
            said = f"-o {args.output}: cannot write the export ({exc.strerror})"
            raise ClientError(said) from None
        write(f"exported {plural(len(nodes), 'session')} to {args.output}", stream=sys.stderr)
    else:
        write(text, end="")
    return 0


def _folder_exists(path: str) -> bool:
    """True when the folder a file at `path` would go in exists (checked before fetching)."""
    return Path(path).resolve().parent.is_dir()


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
                f"{path}: {_nth(session, number, len(sessions))} has no "
                "`id`: every session of an export needs its id (export the subtree again)"
            )
        if named in seen:
            raise ClientError(f"{path}: two sessions have the id {named}: export the subtree again")
        seen.add(named)
        for link in ("parent_id", "source_session_id"):
            try:
                text_field(session, link)
            except ClientError as exc:
                which = _nth(session, number, len(sessions))
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
                f"{path}: {_nth(session, number, len(sessions))}: "
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
                    f"{path}: {_nth(session, number, len(sessions))}: "
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


def _plans(sessions: Sequence[dict[str, Any]], order: Sequence[int]) -> dict[int, Planned]:
    """Every session of the file planned, in import order, before the first call."""
    planned: dict[int, Planned] = {}
    for count, position in enumerate(order, 1):
        try:
            planned[position] = plan(sessions[position])
            _within_limits(planned[position])
        except ClientError as exc:
            raise ClientError(f"{_which(sessions[position], count, len(order))}: {exc}") from None
    return planned


def _within_limits(planned: Planned) -> None:
    """The per-field limits ImportSession checks that hold whatever the deployment's
    settings (label, metadata, tool calls), checked by the same kernel code, so a file is
    refused before its first session is made, not after (sizes in bytes are the gateway's
    settings: it alone checks those).

    Raises:
        ClientError: the fields that break them, named as the file names them.
    """
    from stello import metadata, validation
    from stello.errors import Violations

    found = Violations()
    validation.label(planned.label, found)
    metadata.check_pairs(planned.metadata, found, "metadata")
    for number, record in enumerate(planned.records):
        for call_number, call in enumerate(record.tool_calls):
            path = f"records[{number}].tool_calls[{call_number}]"
            if not call.name:
                found.add(f"{path}.name", "is required")
            validation.tool_arguments(call.arguments_json, f"{path}.arguments_json", found)
    if found.items:
        raise ClientError("; ".join(f"{v.field}: {v.description}" for v in found.items))


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


class Importer:
    """One `stello import` run: the sessions it imports, and what it made itself."""

    def __init__(
        self, client: AsyncClient, digest: str, parent: str | None, started: datetime
    ) -> None:
        self._client, self._digest, self._parent = client, digest, parent
        self._started = started
        self.made: dict[str, str] = {}
        """The file's ids and the sessions that stand for them."""
        self.fresh: list[tuple[str, str | None]] = []
        """Sessions this run made (not answered from an earlier import), with their parents."""
        self.remade: set[str] = set()
        """Those of them an earlier import had made and that were deleted since (the rest
        of `fresh` no earlier import made: it was interrupted, or there was none)."""

    @property
    def replayed(self) -> bool:
        """Nothing new was made: an earlier import of the file answered every session."""
        return not self.fresh

    def made_now(self) -> list[str]:
        """The file's ids of the sessions this run made, in the order it made them (fewer
        than the file's: an earlier import answered the others)."""
        file_id = {session: old for old, session in self.made.items()}
        return [file_id[session] for session, _ in self.fresh]

    def made_again(self) -> list[str]:
        """The file's ids among `made_now` that an earlier import had made and that were
        deleted since."""
        file_id = {session: old for old, session in self.made.items()}
        return [file_id[session] for session, _ in self.fresh if session in self.remade]

    async def one(self, entry: dict[str, Any], planned: Planned) -> None:
        """ImportSession of one entry (parents and sources imported before it).

        Its request id is made from the file and the session, so an import run again
        answers what the first made. Where that session was deleted since (REQUEST_ERASED:
        a restore of a backup whose first import is gone), the next id of a fixed series
        makes it again, so a restore interrupted and run again still finishes once.
        """
        from stello_client.exceptions import RequestErased

        old = str(entry["id"])
        parent = self.made.get(str(entry.get("parent_id"))) or self._parent
        base = f"import:{self._digest}:{self._parent or 'root'}:{old}"
        erased = False
        for attempt in range(ERASED_TRIES):
            request_id = f"{base}:again{attempt}" if attempt else base
            try:
                session = await self._call(entry, planned, parent, request_id)
                break
            except RequestErased:
                erased = True
                if attempt == ERASED_TRIES - 1:
                    raise
        self.made[old] = session.id
        if planned.pinned and not session.pinned:  # a replay pins what a first run did not
            await self._client.pin_session(session.id)
        created = dicts.when(session.created_at)
        if created is None or created >= self._started:
            self.fresh.append((session.id, parent))
            if erased:
                self.remade.add(session.id)

    async def _call(
        self, entry: dict[str, Any], planned: Planned, parent: str | None, request_id: str
    ) -> common_pb2.SessionSummary:
        source = self.made.get(str(entry.get("source_session_id"))) or None
        until = None
        if source and planned.inherit_count > 0:
            until = await _seq_at(self._client, source, planned.inherit_count)
        return await self._client.import_session(
            planned.label,
            records=planned.records,
            parent_id=parent,
            source_session_id=source,
            inherit_until_seq=until,
            status=planned.status,
            config=planned.config,
            turn_count=planned.turn_count,
            request_id=request_id,
            system_prompt=planned.system_prompt,
            memory=planned.memory,
            insight=planned.insight,
            metadata=planned.metadata,
        )

    async def undo(self, error: Exception) -> str:
        """After a failure: delete what this run made, unless the failure may pass (the
        gateway unreachable, a deadline), when a second run finishes it; what was done."""
        from stello_client.exceptions import (
            Cancelled,
            DeadlineExceeded,
            NotFound,
            RpcError,
            Unavailable,
        )

        if not self.fresh:
            return ""
        one = len(self.fresh) == 1
        made = f"{plural(len(self.fresh), 'session')} made before it"
        stay, were = ("stays", "was") if one else ("stay", "were")
        if isinstance(error, (Unavailable, DeadlineExceeded, Cancelled)):
            return f" (the {made} {stay}: run the same import again to finish it)"
        ours = {session for session, _ in self.fresh}
        tops = [session for session, parent in self.fresh if parent not in ours]
        kept: list[str] = []
        gone = 0
        for top in tops:
            try:
                await self._client.delete_session_counted(top)
            except NotFound:
                gone += 1  # erased already: the session it was under was deleted meanwhile
            except RpcError:
                kept.append(top)
        if kept:
            some = "" if len(kept) == len(tops) else "some of "
            under = ", ".join(kept)
            return f" ({some}the {made} {stay}, under {under}: `stello delete` removes it)"
        if not gone:
            how = f"{were} deleted"
        elif self._parent is not None and not await self._present(self._parent):
            how = f"went with --parent {self._parent}, deleted meanwhile"
        else:
            how = f"{were} deleted {'already' if gone == len(tops) else '(some already)'}"
        return f" (nothing of the file was kept: the {made} {how})"

    async def _present(self, session: str) -> bool:
        """Whether the session is in the space (True when that cannot be told)."""
        from stello_client.exceptions import NotFound, RpcError

        try:
            await self._client.get_session(session)
        except NotFound:
            return False
        except RpcError:
            return True
        return True


async def _seq_at(client: AsyncClient, session: str, position: int) -> int:
    """The seq of a session's `position`-th record (1-based): one small ListRecords."""
    found = (await client.list_records(session, offset=position - 1, limit=1)).records
    if not found:
        raise ClientError(f"the imported source {session} has fewer than {position} records")
    return int(found[0].seq)


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

    sessions, digest = _load(args.file)
    order = import_order(sessions)
    planned = _plans(sessions, order)
    async with gateway(args) as client:
        parent = await session_id(client, args.parent, "--parent") if args.parent else None
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
                raise ClientError(f"{_which(entry, count, len(order))}: {line}{done}") from None
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


def _nth(entry: dict[str, Any], number: int, total: int) -> str:
    """How a message names a session of the file: `session 2 of 4 ('Label')`."""
    return f"session {number} of {total} ({shown(entry.get('label'))})"


def _which(entry: dict[str, Any], count: int, total: int) -> str:
    return f"importing {_nth(entry, count, total)}"


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
        # The file's fields keep their names (a label in the file is no --label flag).
        flags={"parent_id": "--parent", "label": "label", "system_prompt": "system_prompt"},
    )
    imported.add_argument("file", metavar="FILE", help="a file of `stello export` (- = stdin)")
    imported.add_argument(
        "--parent", metavar="SESSION", help="place the subtree under SESSION (default: a root)"
    )
