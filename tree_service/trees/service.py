"""GetTree: the forest (or one subtree) in pre-order, capped at max_tree_nodes and
bounded in time (FAILED_PRECONDITION TREE_TOO_LARGE past either)."""

from __future__ import annotations

from operator import itemgetter

from stello.errors import FailedPrecondition, session_not_found
from stello.reasons import TREE_TOO_LARGE
from tree_service.models import (
    ROW_ID,
    ROW_INDEX,
    ROW_PARENT,
    TreeQuery,
    TreeReadTooLong,
    TreeRow,
    TreeRows,
)
from tree_service.unit import TreeRepository


class ForestService:
    """GetTree, over a repository."""

    def __init__(
        self, repository: TreeRepository, *, max_tree_nodes: int, tree_timeout_s: float = 30.0
    ) -> None:
        self._repo = repository
        self._max_tree_nodes = max_tree_nodes
        self._tree_timeout_s = tree_timeout_s

    async def get_tree(self, query: TreeQuery) -> list[TreeRow]:
        """The forest (or one subtree) in pre-order, capped at max_tree_nodes."""
        cap = self._max_tree_nodes
        try:
            rows = await self._repo.trees.tree_rows(
                query.space_id,
                query.root_id,
                query.max_depth,
                cap + 1,
                timeout_s=self._tree_timeout_s,
            )
        except TreeReadTooLong as exc:
            raise FailedPrecondition(
                f"the tree took longer than {self._tree_timeout_s:g} s to read; narrow it with "
                "root_id or max_depth",
                reason=TREE_TOO_LARGE,
            ) from exc
        if len(rows) > cap:
            raise FailedPrecondition(
                f"the tree has more than {cap} nodes; narrow it with root_id or max_depth",
                reason=TREE_TOO_LARGE,
            )
        if query.root_id is not None and not rows.tops:
            raise session_not_found(query.root_id)
        return preorder(rows)


def preorder(rows: TreeRows) -> list[TreeRow]:
    """Pre-order: each top, then its children by index, each followed by its subtree.

    An explicit stack, never recursion: a 10,000-deep chain must not hit the
    interpreter's recursion limit.
    """
    children: dict[str | None, list[TreeRow]] = {}
    for row in rows.below:
        children.setdefault(row[ROW_PARENT], []).append(row)
    by_index = itemgetter(ROW_INDEX)
    for siblings in children.values():
        siblings.sort(key=by_index)
    ordered: list[TreeRow] = []
    append, below_of = ordered.append, children.get
    stack = list(reversed(rows.tops))
    while stack:
        row = stack.pop()
        append(row)
        below = below_of(row[ROW_ID])
        if below:
            stack.extend(reversed(below))
    return ordered
