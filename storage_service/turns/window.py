"""The window of a turn: the newest records after the cache within a budget (DESIGN §4.3).

Read inside BeginTurn's transaction, under the session's row lock. The budget
is the caller's window less the stored prefix (system prompt, insight,
summary: their estimates by `stello.rules.tokens`, the rule the stored columns
follow; and, when asked for and not empty, the shared memory index, DESIGN
§4.5) and the caller's reserve. The window's start comes from the token
columns alone (two index probes, `RecordRepository.first_after` and
`.reaching`); then the records are read newest first, cut at the reply size
limit, and the start is moved back to a tool-group boundary (the assistant
record whose calls the first tool records answer), so a trailing open tool
group is always whole (SubmitToolResults needs it). The newest record is
always in it, whatever its size. Nothing here reads more than the window and
one tool group.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from stello.rules.memory_rules import index_cut, index_line
from stello.rules.tokens import estimate_tokens, record_tokens
from storage_service.models import (
    IndexCaps,
    RecordQuery,
    SharedMemoryEntry,
    StoredRecord,
    TurnBudget,
    TurnState,
)
from storage_service.turns.repository import LockedTurn
from storage_service.unit import UnitOfWork

WINDOW_MAX_RECORDS = 10_000
"""A window never holds more records than this (records of a few characters each)."""


def prefix_tokens(locked: LockedTurn) -> int:
    """The estimate of what storage holds of the context before the records."""
    texts = (locked.system_prompt, locked.insight, locked.cache.summary if locked.cache else None)
    return sum(record_tokens(text) for text in texts if text)


async def read_turn(
    uow: UnitOfWork,
    space_id: uuid.UUID,
    session_id: uuid.UUID,
    locked: LockedTurn,
    budget: TurnBudget,
    max_bytes: int,
) -> TurnState:
    """The turn of a locked session whose lease was just taken."""
    covered = locked.cache.covered_until_seq if locked.cache else 0
    index, total, index_tokens = await _index(uow, space_id, budget.index)
    first = await uow.records.first_after(space_id, session_id, covered)
    state = TurnState(
        session=locked.meta,
        last_seq=locked.last_seq,
        system_prompt=locked.system_prompt,
        insight=locked.insight,
        cache=locked.cache,
        memory_index=index,
        memory_total=total,
        skills=locked.skills,
    )
    if first is None:
        return state
    tail_tokens = locked.token_total - first.before
    available = budget.window_tokens - budget.reserve_tokens - prefix_tokens(locked) - index_tokens
    after = first.seq - 1
    if tail_tokens > available:
        floor = locked.token_total - available
        start = await uow.records.reaching(space_id, session_id, floor)
        if start is None:
            after = locked.last_seq
        else:
            after = start.seq - 1 if start.before >= floor else start.seq
    after = min(after, locked.last_seq - 1)  # the newest record, whatever its size
    query = RecordQuery(limit=WINDOW_MAX_RECORDS, after_seq=after, newest_first=True)
    found = await uow.records.page(space_id, session_id, query, max_bytes)
    records = found[0] if found else []
    records = await _from_group_start(uow, space_id, session_id, records, max_bytes)
    return replace(state, records=tuple(records), tail_tokens=tail_tokens, first_tail_seq=first.seq)


async def _index(
    uow: UnitOfWork, space_id: uuid.UUID, caps: IndexCaps | None
) -> tuple[tuple[SharedMemoryEntry, ...], int, int]:
    """The shared memory entries the index shows within `caps`, the space's count, and what
    the index costs the budget (0 when it shows none, as it is then not sent)."""
    if caps is None:
        return (), 0, 0
    entries, total = await uow.memory.page(space_id, None, caps.max_entries)
    shown = entries[: index_cut(entries, caps.max_tokens)]
    if not shown:
        return (), total, 0
    lines = sum(estimate_tokens(index_line(e.slug, e.summary) + "\n") for e in shown)
    return tuple(shown), total, lines + caps.overhead_tokens


async def _from_group_start(
    uow: UnitOfWork,
    space_id: uuid.UUID,
    session_id: uuid.UUID,
    records: list[StoredRecord],
    max_bytes: int,
) -> list[StoredRecord]:
    """`records` starting at the assistant record whose calls its first tool records answer."""
    if not records or records[0].role != "tool":
        return records
    caller = await uow.records.caller_before(space_id, session_id, records[0].seq)
    if caller is None:
        return records  # orphan tool results: the context's sanitiser drops them
    query = RecordQuery(limit=WINDOW_MAX_RECORDS, after_seq=caller - 1, before_seq=records[0].seq)
    found = await uow.records.page(space_id, session_id, query, max_bytes)
    return [*(found[0] if found else []), *records]
