"""Digest pages over sessions whose memory and insight are at the slot limit (1 MiB each).

Forty such sessions hold 80 MiB of slots, past storage's 64 MiB reply limit
(STELLO_MAX_MESSAGE_BYTES): a page asks storage for at most its own bytes
(STELLO_GATEWAY_MAX_PAGE_BYTES, 4 MiB), so it is shorter, never RESOURCE_EXHAUSTED.
On main a default page (or any of 32 or more) asked for all of their slots in one
BatchGetSlots, which storage refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from stello.agent.v1 import agent_pb2
from stello.settings import MIB
from tests.gateway.conftest import Counted
from tests.tree.seed import chain, seed_topology

pytestmark = pytest.mark.sql

SESSIONS = 41
"""A chain: ListSessionDigests lists all 41, GetLineage of the last answers 40 ancestors."""

SLOT = "s" * MIB
"""A memory or insight at STELLO_MAX_SLOT_BYTES (written with SQL, as if by an older limit)."""

PAGE_BYTES = 4 * MIB
"""STELLO_GATEWAY_MAX_PAGE_BYTES' default."""


@pytest.fixture(name="chained")
async def _chained(counted: Counted, pool: asyncpg.Pool) -> list[uuid.UUID]:
    """The chain of SESSIONS in the counted stack's space, each with a full memory and
    insight."""
    space = counted.stack.space
    ids = await seed_topology(pool, space.id, chain(SESSIONS))
    async with pool.acquire() as con:
        await con.copy_records_to_table(
            "session_slots",
            records=[(space.id, sid, SLOT, SLOT) for sid in ids],
            columns=["space_id", "session_id", "memory", "insight"],
        )
    counted.clear()
    return ids


async def every_page(
    call: Callable[[str], Awaitable[Any]], field: str
) -> tuple[list[str], list[int]]:
    """The digests' ids of every page from the first, and each page's bytes; each page
    has at least one digest with its full memory and insight."""
    seen: list[str] = []
    sizes: list[int] = []
    token = ""
    while True:
        page = await call(token)
        digests = list(getattr(page, field))
        assert digests, "a page carries at least one digest"
        assert all(d.memory == SLOT and d.insight == SLOT for d in digests)
        seen += [d.id for d in digests]
        sizes.append(page.ByteSize())
        token = page.next_page_token
        if not token:
            return seen, sizes


class TestSlotsAtTheLimit:
    async def test_digests_page_through_every_session_once(
        self, counted: Counted, chained: list[uuid.UUID]
    ) -> None:
        """ListSessionDigests' default pages stay within 4 MiB, each at least one digest and
        one storage BatchGetSlots, and list every session exactly once in ListAll order; a
        page of 32 or 1000 is one such page too."""
        stack = counted.stack

        async def page(token: str, size: int = 0) -> Any:
            return await stack.gw.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=stack.space.sid, page_size=size, page_token=token
                )
            )

        seen, sizes = await every_page(page, "digests")
        assert seen == [str(sid) for sid in sorted(chained)]
        assert max(sizes) <= PAGE_BYTES, sizes
        storage, tree = counted.calls()
        assert storage == {"BatchGetSlots": len(sizes)}
        assert tree["ListAll"] <= 2 * len(sizes)
        for size in (32, 1000):
            first = await page("", size)
            assert first.digests[0].id == seen[0] and first.ByteSize() <= PAGE_BYTES

    async def test_lineage_pages_through_every_ancestor_once(
        self, counted: Counted, chained: list[uuid.UUID]
    ) -> None:
        """GetLineage's default pages of the last session stay within 4 MiB, each at least
        one ancestor and one storage BatchGetSlots, and give every ancestor exactly once,
        nearest first; a page of 32 or 1000 is one such page too."""
        stack = counted.stack

        async def page(token: str, size: int = 0) -> Any:
            return await stack.gw.GetLineage(
                agent_pb2.GetLineageRequest(
                    space_id=stack.space.sid,
                    session_id=str(chained[-1]),
                    page_size=size,
                    page_token=token,
                )
            )

        seen, sizes = await every_page(page, "ancestors")
        assert seen == [str(sid) for sid in reversed(chained[:-1])]
        assert max(sizes) <= PAGE_BYTES, sizes
        storage, tree = counted.calls()
        assert storage == {"BatchGetSlots": len(sizes)}
        assert tree["ListAncestors"] <= 2 * len(sizes)
        for size in (32, 1000):
            first = await page("", size)
            assert first.ancestors[0].id == seen[0] and first.ByteSize() <= PAGE_BYTES


async def test_a_page_listed_anew_stays_within_its_bytes(
    counted: Counted, pool: asyncpg.Pool
) -> None:
    """A page cut short by its bytes lists again for as many sessions as fit; when sessions
    were deleted in between, that second listing holds others, whose slots may not fit
    either: the page is cut again (it held them all: 6 MiB in a 4 MiB page). Every session
    left is listed once, every page within 4 MiB."""
    stack = counted.stack
    space = stack.space
    ids = sorted(await seed_topology(pool, space.id, [None] * 6))  # ListAll's order
    small, big = ids[:2], ids[2:]
    async with pool.acquire() as con:
        await con.copy_records_to_table(
            "session_slots",
            records=[(space.id, sid, "m", "i") for sid in small]
            + [(space.id, sid, SLOT, SLOT) for sid in big],
            columns=["space_id", "session_id", "memory", "insight"],
        )
    list_all = counted.clients.tree.list_all
    calls = 0

    async def deleting_list_all(*args: Any, **kwargs: Any) -> Any:
        """ListAll; after the first, the two small sessions are deleted."""
        nonlocal calls
        page = await list_all(*args, **kwargs)
        calls += 1
        if calls == 1:
            for sid in small:
                await stack.gw.DeleteSession(
                    agent_pb2.DeleteSessionRequest(space_id=space.sid, session_id=str(sid))
                )
        return page

    counted.clients.tree.list_all = deleting_list_all  # type: ignore[method-assign]

    async def page(token: str) -> Any:
        return await stack.gw.ListSessionDigests(
            agent_pb2.ListSessionDigestsRequest(space_id=space.sid, page_token=token)
        )

    seen, sizes = await every_page(page, "digests")
    assert seen == [str(sid) for sid in big]
    assert max(sizes) <= PAGE_BYTES, sizes
