"""The topology reads: GetNode, ListRoots, GetChildren, GetSiblings, the ancestors,
ListAll and ResolveSessionPrefix. A session not visible is NOT_FOUND."""

from __future__ import annotations

import uuid

from stello.errors import InvalidArgument, session_not_found
from stello.rules.prefixes import prefix_range
from tree_service.encoding import (
    bad_ancestor_token,
    config_from_json,
    decode_ancestor_token,
    decode_page_token,
    encode_ancestor_token,
    encode_page_token,
    listing_binding,
)
from tree_service.models import (
    Node,
    PageQuery,
    SessionConfig,
    SessionFilter,
    Summary,
    SummaryPage,
    TreeEntry,
)
from tree_service.unit import TreeRepository, TreeTx


class NodeService:
    """The topology reads, over a repository."""

    def __init__(self, repository: TreeRepository) -> None:
        self._repo = repository
        self._page_token_key: bytes | None = None

    async def get_node(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node:
        """A visible session's node."""
        node = await self._repo.nodes.node(space_id, session_id)
        if node is None:
            raise session_not_found(session_id)
        return node

    async def get_node_with_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[Node, SessionConfig | None, dict[str, str]]:
        """A visible session's node, its stored config (None when never written) and its
        metadata."""
        found = await self._repo.nodes.node_with_config(space_id, session_id)
        if found is None:
            raise session_not_found(session_id)
        node, stored, pairs = found
        return node, None if stored is None else config_from_json(stored), pairs

    async def list_roots(self, space_id: uuid.UUID) -> list[Node]:
        """Every root of the space by (created_at, id)."""
        return await self._repo.nodes.roots(space_id)

    async def list_all(self, query: PageQuery) -> SummaryPage:
        """One page of every session of the space by (created_at, id)."""
        binding = listing_binding(query.space_id, query.status, query.filter)
        after = decode_page_token(query.page_token, binding) if query.page_token else None
        rows = await self._repo.nodes.summaries(
            query.space_id, query.status, query.filter, query.page_size + 1, after
        )
        named = query.filter.root_id is not None or query.filter.parent_id is not None
        if not rows and named:
            await self._explain_empty(query.space_id, query.filter)
        if len(rows) <= query.page_size:
            return SummaryPage(tuple(rows), "")
        page = tuple(rows[: query.page_size])
        return SummaryPage(page, encode_page_token(page[-1].created_at, page[-1].id, binding))

    async def _explain_empty(self, space_id: uuid.UUID, found: SessionFilter) -> None:
        """Raise when the session named by the root_id or parent_id of a filter whose page
        came back empty is why: the listing a client meant (that tree, those children)
        would silently be empty. A page that lists something costs nothing more.

        Raises:
            NotFound: `filter.root_id` or `filter.parent_id` names no visible session of the
                space (one of another space alike), as GetTree's root_id and GetChildren.
            InvalidArgument: `filter.root_id` names a session that is not a root.
        """

        async def work(tx: TreeTx) -> None:
            if found.root_id is not None:
                visible, parent_id = await tx.nodes.visible_parent(space_id, found.root_id)
                if not visible:
                    raise session_not_found(found.root_id, "filter.root_id: session")
                if parent_id is not None:
                    raise InvalidArgument.field(
                        "filter.root_id",
                        f"names session {found.root_id}, which is not a root (its parent is "
                        f"{parent_id}): give the root of its tree (the last of its lineage), "
                        "or filter.parent_id",
                    )
            if found.parent_id is not None:
                visible, _ = await tx.nodes.visible_parent(space_id, found.parent_id)
                if not visible:
                    raise session_not_found(found.parent_id, "filter.parent_id: session")

        await self._repo.transaction(work)

    async def get_children(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """A session's visible children by index."""

        async def work(tx: TreeTx) -> list[Node]:
            visible, _ = await tx.nodes.visible_parent(space_id, session_id)
            if not visible:
                raise session_not_found(session_id)
            return await tx.nodes.children(space_id, session_id)

        return await self._repo.transaction(work)

    async def get_siblings(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """The parent's other visible children by index; [] for a root."""

        async def work(tx: TreeTx) -> list[Node]:
            visible, parent_id = await tx.nodes.visible_parent(space_id, session_id)
            if not visible:
                raise session_not_found(session_id)
            if parent_id is None:
                return []
            return await tx.nodes.children(space_id, parent_id, without=session_id)

        return await self._repo.transaction(work)

    async def get_ancestors(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """The ancestors nearest first; [] for a root."""
        chain = await self._repo.nodes.ancestry(space_id, session_id)
        if not chain:
            raise session_not_found(session_id)
        return chain[1:]

    async def list_ancestors(
        self, space_id: uuid.UUID, session_id: uuid.UUID, page_size: int, page_token: str
    ) -> tuple[list[TreeEntry], str]:
        """One page of the ancestors nearest first, and the next page's token ("" at the root)."""
        key = await self._token_key()
        start = session_id
        if page_token:
            start = decode_ancestor_token(key, page_token, space_id, session_id)
        chain = await self._repo.nodes.ancestor_page(space_id, session_id, start, page_size)
        if chain is None:
            if start != session_id and await self._repo.nodes.visible(space_id, session_id):
                raise bad_ancestor_token()
            raise session_not_found(session_id)
        page = chain[1:]
        more = bool(page) and page[-1].parent_id is not None
        if not more:
            return page, ""
        return page, encode_ancestor_token(key, space_id, session_id, page[-1].id)

    async def _token_key(self) -> bytes:
        """The page-token key, read once (it never changes)."""
        if self._page_token_key is None:
            self._page_token_key = await self._repo.nodes.token_key()
        return self._page_token_key

    async def resolve_prefix(self, space_id: uuid.UUID, digits: str, limit: int) -> list[Summary]:
        """Up to `limit` visible sessions whose id starts with the hex `digits`, by id."""
        low, high = prefix_range(digits)
        return await self._repo.nodes.by_prefix(space_id, low, high, limit)


async def visible_node(
    tx: TreeTx, space_id: uuid.UUID, session_id: uuid.UUID, *, linked: bool = True
) -> Node:
    """A visible session's node (without its children and refs unless `linked`), in the
    unit of work (NOT_FOUND when it is not)."""
    node = await tx.nodes.node(space_id, session_id, linked=linked)
    if node is None:
        raise session_not_found(session_id)
    return node
