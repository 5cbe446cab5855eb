"""The space outbox (DESIGN §4.6): a change's events, written by its transaction's last statement.

A repository `add`s an event where it makes the change (one place per write
kind); the unit of work's wrapper calls `flush` as the transaction's last
statement. `flush` takes the space's next positions from `space_positions`
(migration 0005), whose row then stays locked until the commit: positions are
handed out in commit order, so a reader can never find a smaller position
committed after it passed it. Events carry ids, kinds and seqs only.

Events of a session that is still provisional are dropped in the same
statement (a provisional session produces nothing until it is committed), and
a transaction that rolls back takes its events and positions with it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Literal

import asyncpg

EventKind = Literal[
    "session_committed",
    "session_updated",
    "session_archived",
    "session_unarchived",
    "subtree_deleted",
    "records_appended",
    "records_trimmed",
    "turn_committed",
    "system_prompt_put",
    "insight_put",
    "insight_cleared",
    "memory_put",
    "config_put",
    "ref_added",
    "ref_removed",
    "shared_memory_upserted",
    "shared_memory_removed",
    "turn_released",
    "metadata_changed",
    "retention_policy_put",
]
EVENT_KINDS: tuple[EventKind, ...] = EventKind.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Event:
    """One change: its kind and the ids and seqs it names (DESIGN §4.6)."""

    kind: EventKind
    session_id: uuid.UUID | None = None
    other_id: uuid.UUID | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    session_ids: tuple[uuid.UUID, ...] = ()
    entry_id: uuid.UUID | None = None
    """The shared memory entry a change is about (its surrogate id, never its slug: events
    carry no user text)."""
    # Storage writes to provisional sessions too: their events are kept only
    # once the session is visible (checked by the flush, under the same snapshot).
    if_visible: bool = False


# $1 space; then one array per column. Provisional sessions' events are filtered
# first, so the positions taken are exactly the events kept; then the positions
# are taken and the events written (migration 0033). A function of statements
# each routed to the space's worker on Citus: as one statement, its INSERTs were
# CTEs, which Citus plans through every worker (explore5 F4).
FLUSH = """
SELECT stello_flush_events($1, $2::text[], $3::uuid[], $4::uuid[], $5::int8[], $6::int8[],
                           $7::text[], $8::bool[], $9::uuid[])
"""


class Outbox:
    """The events of one unit of work, per space, until its last statement writes them."""

    def __init__(self) -> None:
        self._pending: dict[uuid.UUID, list[Event]] = {}

    def add(self, space_id: uuid.UUID, event: Event) -> None:
        """Queue `event` of `space_id` for this transaction's `flush`."""
        self._pending.setdefault(space_id, []).append(event)

    @property
    def pending(self) -> bool:
        """Whether any event waits for `flush`."""
        return bool(self._pending)

    async def flush(self, con: asyncpg.Connection) -> None:
        """Write the queued events; call it as the transaction's last statement."""
        pending, self._pending = self._pending, {}
        for space_id, events in sorted(pending.items()):  # one lock order: no deadlock
            await con.execute(
                FLUSH,
                space_id,
                [e.kind for e in events],
                [e.session_id for e in events],
                [e.other_id for e in events],
                [e.first_seq for e in events],
                [e.last_seq for e in events],
                [
                    json.dumps([str(i) for i in e.session_ids]) if e.session_ids else None
                    for e in events
                ],
                [e.if_visible for e in events],
                [e.entry_id for e in events],
            )
