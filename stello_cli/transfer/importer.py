"""`stello import`'s calls: one ImportSession per planned session
(`stello_cli.transfer.import_file`), each with a request id made from the file, and the undo of
what a failed run made.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from stello.common.v1 import common_pb2
from stello_cli.output.style import plural
from stello_cli.transfer.import_file import Planned
from stello_client import dicts
from stello_client.errors import ClientError

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient

ERASED_TRIES = 20
"""Request ids tried for one session whose earlier imports were deleted since (a backup
restored that often within the 24 h its ids are kept)."""


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
