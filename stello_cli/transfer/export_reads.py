"""What `stello export` reads: each session's view and the records the file keeps.

A fork by reference (DESIGN §4.4) whose source is in the export is written as
its own records and ``inherits`` (`stello_cli.transfer.commands`), so only its own
records are asked for: those after its lineage's cut
(``progress.inherited_until_seq``), plus its first record, which says where its
inherited part starts. Its cost never grows with the history it inherits
(STYLE 17). A view's seqs are contiguous (appends number them in order, trims
cut a prefix), so the fork's inherited part is its source's records through the
cut exactly when both views start at the same seq; then it is the first
``cut - first + 1`` of the source's records. When they differ (a trim on either
side since the fork) its inherited records are read too, and the file keeps
them as copies. A session whose first record is not inherited, or whose source
is not in the export, is read whole (a fork made before forks by reference held
copies, recognised in the file by content: `exports.inherited_prefix`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli.turns.talk import all_records

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient

FETCH_CALLS = 8
"""Sessions read at once."""


@dataclass(frozen=True, slots=True)
class Inherits:
    """A fork's inherited part, the first `count` of its source's records through
    `until_seq`."""

    source: str
    until_seq: int
    count: int


@dataclass(slots=True)
class Read:
    """One session as read: its view, and its records — all of them, or only its own
    (`own_after` set: those after that cut, `first_seq` where its inherited part
    starts)."""

    view: agent_pb2.SessionView
    records: list[common_pb2.Record]
    own_after: int | None = None
    first_seq: int | None = None
    inherits: Inherits | None = None
    copies: bool = False
    """Its inherited records were read because they are not its source's (kept as copies)."""

    @property
    def view_first_seq(self) -> int | None:
        """The seq of the first record of its view (None: it has none)."""
        if self.own_after is not None:
            return self.first_seq
        return self.records[0].seq if self.records else None


async def read_for_export(client: AsyncClient, nodes: Sequence[common_pb2.TreeNode]) -> list[Read]:
    """Every session's view and the records its export keeps, a few sessions at a time
    (see the module docstring)."""
    exported = {node.id for node in nodes}
    gate = asyncio.Semaphore(FETCH_CALLS)

    async def one(node: common_pb2.TreeNode) -> Read:
        async with gate:
            return await _read(client, node.id, exported)

    reads = list(await asyncio.gather(*(one(node) for node in nodes)))
    by_id = {read.view.node.id: read for read in reads}
    await asyncio.gather(*(_settle(client, read, by_id) for read in reads))
    return reads


async def _read(client: AsyncClient, session: str, exported: set[str]) -> Read:
    """The session's view and records: only its own when it may be written by reference."""
    view = await client.get_session(session)
    cut = view.progress.inherited_until_seq
    source = view.node.source_session_id if view.node.HasField("source_session_id") else None
    if cut and source in exported:
        first = [record async for record in client.records(session, limit=1)]
        if first and first[0].seq <= cut:
            own = [record async for record in client.records(session, after_seq=cut)]
            return Read(view, own, own_after=cut, first_seq=first[0].seq)
    return Read(view, await all_records(client, session))


async def _settle(client: AsyncClient, read: Read, by_id: dict[str, Read]) -> None:
    """Decide how a fork read by its own records is written: by reference when its
    inherited part is its source's, else with its inherited records read now."""
    cut = read.own_after
    if cut is None:
        return
    source = by_id[read.view.node.source_session_id]
    if source.view_first_seq == read.first_seq and read.first_seq is not None:
        read.inherits = Inherits(source.view.node.id, cut, cut - read.first_seq + 1)
        return
    session = read.view.node.id
    inherited = [record async for record in client.records(session, before_seq=cut + 1)]
    read.records[:0] = inherited
    read.own_after, read.copies = None, True
