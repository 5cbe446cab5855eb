"""AddRef and RemoveRef: each one unit of work, the from-session bumped when it changed."""

from __future__ import annotations

import uuid

from stello.errors import FailedPrecondition, session_not_found
from stello.reasons import REF_TO_ANCESTOR, REF_TO_DESCENDANT, REF_TO_SELF
from tree_service.models import Node
from tree_service.nodes.service import visible_node
from tree_service.unit import TreeRepository, TreeTx


class RefService:
    """AddRef and RemoveRef, over a repository."""

    def __init__(self, repository: TreeRepository) -> None:
        self._repo = repository

    async def add_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> Node:
        """Add `from -> to` unless present; refuses self, ancestors and descendants (an end
        not visible in the space is NOT_FOUND first, a self-reference included)."""

        async def work(tx: TreeTx) -> Node:
            ends = await tx.refs.ref_ends(space_id, (from_id, to_id))
            for session_id in (from_id, to_id):
                if session_id not in ends:
                    raise session_not_found(session_id)
            if from_id == to_id:
                raise FailedPrecondition(
                    "a session cannot reference itself",
                    reason=REF_TO_SELF,
                    metadata={"subject": f"session/{from_id}"},
                )
            (from_root, from_depth), (to_root, to_depth) = ends[from_id], ends[to_id]
            if from_root == to_root and to_depth != from_depth:
                if to_depth < from_depth and await tx.refs.is_ancestor(space_id, from_id, to_id):
                    raise FailedPrecondition(
                        f"session {to_id} is an ancestor of {from_id}",
                        reason=REF_TO_ANCESTOR,
                        metadata={"subject": f"session/{to_id}"},
                    )
                if to_depth > from_depth and await tx.refs.is_ancestor(space_id, to_id, from_id):
                    raise FailedPrecondition(
                        f"session {to_id} is a descendant of {from_id}",
                        reason=REF_TO_DESCENDANT,
                        metadata={"subject": f"session/{to_id}"},
                    )
            if not await tx.refs.lock_ref_source(space_id, from_id):
                raise session_not_found(from_id)
            if await tx.refs.insert_ref(space_id, from_id, to_id):
                await tx.sessions.touch(space_id, from_id)
            return await visible_node(tx, space_id, from_id)

        return await self._repo.transaction(work)

    async def remove_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> Node:
        """Remove `from -> to` if present; idempotent."""

        async def work(tx: TreeTx) -> Node:
            ends = await tx.refs.ref_ends(space_id, (from_id, to_id))
            for session_id in (from_id, to_id):
                if session_id not in ends:
                    raise session_not_found(session_id)
            if await tx.refs.delete_ref(space_id, from_id, to_id):
                await tx.sessions.touch(space_id, from_id)
            return await visible_node(tx, space_id, from_id)

        return await self._repo.transaction(work)
