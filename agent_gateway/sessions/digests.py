"""The gateway's digest pages (ListSessionDigests, GetLineage): a tree listing joined with each
session's memory and insight from storage, within a page's bytes (DESIGN §2).

A page is one tree listing and one storage BatchGetSlots bounded by the page's bytes; when the
slots of the listed sessions do not all fit (a memory may be a megabyte), the listing is asked
again for as many as fit, so that its token continues right after them.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_gateway.clients import Caller, StorageClient, TreeClient
from stello.common.v1 import common_pb2
from stello.settings import MIB
from stello.storage.v1 import storage_pb2


@dataclass(frozen=True, slots=True)
class DigestPage:
    """One page of digests and the token of the next ("" on the last page)."""

    digests: list[common_pb2.SessionDigest]
    next_page_token: str


MAX_PAGE_BYTES = 4 * MIB
"""STELLO_GATEWAY_MAX_PAGE_BYTES' default."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A tree listing's page: its sessions (summaries or nodes) and its next token."""

    sessions: Sequence[Any]
    next_page_token: str


DIGEST_SLOTS = (storage_pb2.SLOT_KIND_MEMORY, storage_pb2.SLOT_KIND_INSIGHT)
"""The slots a digest carries (a listing never reads every long system prompt)."""

DIGEST_FRAMING_BYTES = 8
"""A digest's tag and length in its page (at most 1 + 5 bytes) and a margin."""


def _summary_digest(
    session: common_pb2.SessionSummary, slot: storage_pb2.SessionSlots
) -> common_pb2.SessionDigest:
    """A ListAll session's digest."""
    digest = common_pb2.SessionDigest(
        id=session.id,
        label=session.label,
        status=session.status,
        turn_count=session.turn_count,
        pinned=session.pinned,
    )
    if session.metadata:  # most sessions have none: an empty map costs a copy per row
        digest.metadata.update(session.metadata)
    if session.HasField("parent_id"):
        digest.parent_id = session.parent_id
    _fill_slots(digest, slot)
    return digest


def _node_digest(
    node: common_pb2.TreeNode, slot: storage_pb2.SessionSlots
) -> common_pb2.SessionDigest:
    """An ancestor's digest (a ListAncestors node)."""
    digest = common_pb2.SessionDigest(
        id=node.id, label=node.label, status=node.status, turn_count=node.turn_count
    )
    if node.HasField("parent_id"):
        digest.parent_id = node.parent_id
    _fill_slots(digest, slot)
    return digest


class DigestPages:
    """ListSessionDigests' and GetLineage's pages (see the module docstring)."""

    def __init__(
        self, tree: TreeClient, storage: StorageClient, *, max_page_bytes: int = MAX_PAGE_BYTES
    ) -> None:
        self._tree = tree
        self._storage = storage
        # Most bytes of digests a ListSessionDigests or GetLineage page carries.
        self._max_page_bytes = max_page_bytes

    async def list_digests(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        *,
        status: common_pb2.SessionStatus,
        page_size: int,
        page_token: str,
        session_filter: common_pb2.SessionFilter | None = None,
    ) -> DigestPage:
        """One page: one tree ListAll (which filters) and one storage BatchGetSlots of at
        most a page's bytes (and ListAll again for a page cut short by its bytes: `_page`).

        A session deleted between the two calls is left out (it no longer exists).
        """

        async def listed(size: int) -> Listed:
            page = await self._tree.list_all(
                caller,
                space_id,
                status=status,
                page_size=size,
                page_token=page_token,
                session_filter=session_filter,
            )
            return Listed(page.sessions, page.next_page_token)

        return await self._page(caller, space_id, listed, page_size, _summary_digest)

    async def lineage(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        *,
        page_size: int,
        page_token: str,
    ) -> DigestPage:
        """One page of the session's ancestors, nearest first, as digests: one tree
        ListAncestors and one storage BatchGetSlots of at most a page's bytes (an ancestor
        erased between them is left out; a page cut short by its bytes lists again:
        `_page`)."""

        async def listed(size: int) -> Listed:
            page = await self._tree.list_ancestors(
                caller, space_id, session_id, page_size=size, page_token=page_token
            )
            return Listed(page.nodes, page.next_page_token)

        return await self._page(caller, space_id, listed, page_size, _node_digest)

    async def _page(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        listed: Callable[[int], Awaitable[Listed]],
        page_size: int,
        digest_of: Callable[[Any, storage_pb2.SessionSlots], common_pb2.SessionDigest],
    ) -> DigestPage:
        """The listing's page as digests with their memory and insight, within
        `max_page_bytes`: storage reads the slots of the page's first sessions that fit
        it (at least one), and when the digests stop short of the listing (a memory may be
        a megabyte), the listing is asked again for as many sessions as fit, and its token
        continues right after them (again, should sessions listed anew since not fit)."""
        page = await listed(page_size)
        slots, read = await self._read(caller, space_id, [s.id for s in page.sessions])
        digests, fit = self._fitting(page.sessions[:read], slots, digest_of)
        while fit < len(page.sessions):
            page = await listed(fit)
            missing = [s.id for s in page.sessions if s.id not in slots]
            if missing:  # listed anew since (one before them erased): read theirs too
                slots.update(await self._slots(caller, space_id, missing))
            digests, fit = self._fitting(page.sessions, slots, digest_of)
        return DigestPage(digests, page.next_page_token)

    async def _slots(
        self, caller: Caller, space_id: uuid.UUID, ids: list[str]
    ) -> dict[str, storage_pb2.SessionSlots]:
        """The sessions' memory and insight, by id (an erased session's missing), however
        many calls their bytes take."""
        found: dict[str, storage_pb2.SessionSlots] = {}
        while ids:
            slots, read = await self._read(caller, space_id, ids)
            found.update(slots)
            ids = ids[read:]
        return found

    async def _read(
        self, caller: Caller, space_id: uuid.UUID, ids: list[str]
    ) -> tuple[dict[str, storage_pb2.SessionSlots], int]:
        """One storage call: the memory and insight of the first of `ids` whose slots fit a
        page's bytes (at least one found), by id, and how many of `ids` it read."""
        if not ids:
            return {}, 0
        reply = await self._storage.batch_get_slots(
            caller, space_id, ids, DIGEST_SLOTS, max_reply_bytes=self._max_page_bytes
        )
        return {s.session_id: s for s in reply.slots}, reply.next_index or len(ids)

    def _fitting(
        self,
        sessions: Sequence[Any],
        slots: dict[str, storage_pb2.SessionSlots],
        digest_of: Callable[[Any, storage_pb2.SessionSlots], common_pb2.SessionDigest],
    ) -> tuple[list[common_pb2.SessionDigest], int]:
        """The digests of `sessions` (those with slots) while they fit `max_page_bytes`
        (the first always), and how many of `sessions` they took."""
        digests: list[common_pb2.SessionDigest] = []
        size = 0
        for taken, session in enumerate(sessions):
            slot = slots.get(session.id)
            if slot is None:
                continue
            digest = digest_of(session, slot)
            size += digest.ByteSize() + DIGEST_FRAMING_BYTES
            if digests and size > self._max_page_bytes:
                return digests, taken
            digests.append(digest)
        return digests, len(sessions)


def _fill_slots(digest: common_pb2.SessionDigest, slot: storage_pb2.SessionSlots) -> None:
    """Set the digest's memory and insight from the slots that hold one."""
    if slot.HasField("memory"):
        digest.memory = slot.memory
    if slot.HasField("insight"):
        digest.insight = slot.insight
