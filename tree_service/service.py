"""The session tree's domain logic: ids, topology, refs, config, erasure, provisioning.

`TreeService` knows nothing of gRPC: it takes validated domain inputs
(`tree_service.models`), decides what exists and what is allowed, and runs
each unit of work in one transaction through `TreeRepository`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from operator import itemgetter

from stello import metadata
from stello.db import SpaceNode
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    NotFound,
    ResourceExhausted,
    Violations,
    session_not_found,
)
from stello.idempotency import Answered, answer_of
from stello.prefixes import prefix_range
from stello.reasons import (
    REF_TO_ANCESTOR,
    REF_TO_DESCENDANT,
    REF_TO_SELF,
    SESSION_ARCHIVED,
    TREE_TOO_LARGE,
)
from stello.settings import MAX_MESSAGE_BYTES
from stello.tasks import ended_well, to_the_end
from tree_service.encoding import (
    bad_ancestor_token,
    config_from_json,
    config_to_json,
    decode_ancestor_token,
    decode_node,
    decode_page_token,
    encode_ancestor_token,
    encode_node,
    encode_page_token,
    listing_binding,
)
from tree_service.models import (
    CHILD_LABEL,
    ROOT_LABEL,
    ROW_ID,
    ROW_INDEX,
    ROW_PARENT,
    MetadataChange,
    NewSession,
    Node,
    PageQuery,
    SessionConfig,
    SessionSpec,
    Status,
    Summary,
    SummaryPage,
    SweepQuery,
    SweptSession,
    TreeEntry,
    TreeQuery,
    TreeReadTooLong,
    TreeRow,
    TreeRows,
)
from tree_service.repository import TreeRepository, TreeTx, deadline_passed

log = logging.getLogger(__name__)

CREATE_SCOPE = "tree.CreateSession"

SWEEP_BATCH = 1000
MAX_DRY_RUN = 100_000
# A DeleteSubtree reply's size: each id a field tag, a length and 36 characters, and
# room for the count.
DELETED_ID_BYTES = 38
DELETE_REPLY_OVERHEAD = 16


@dataclass(frozen=True, slots=True)
class ReplyFit:
    """Whether a DeleteSubtree's ids fit its reply: under the server's limit and the
    caller's own (`max_reply_bytes`, 0 = none), unless it asked for the count alone."""

    server_limit: int
    caller_limit: int
    session_id: uuid.UUID
    count_only: bool

    def check(self, count: int) -> None:
        """Refuse (RESOURCE_EXHAUSTED) `count` ids that would not fit."""
        if self.count_only:
            return
        size = DELETED_ID_BYTES * count + DELETE_REPLY_OVERHEAD
        limit, name = self.server_limit, "STELLO_MAX_MESSAGE_BYTES"
        if 0 < self.caller_limit < limit:
            limit, name = self.caller_limit, "max_reply_bytes"
        if size > limit:
            sessions = "1 session" if count == 1 else f"{count} sessions"
            raise ResourceExhausted(
                f"session {self.session_id} has {sessions} in its subtree: their ids "
                f"({size} bytes: {DELETED_ID_BYTES} per session and {DELETE_REPLY_OVERHEAD} "
                f"more) would not fit the reply ({name} = {limit}); nothing was deleted. Set "
                "count_only to answer their count alone"
            )


class TreeService:
    """Every SessionTree operation, over a repository."""

    def __init__(
        self,
        repository: TreeRepository,
        *,
        max_tree_nodes: int,
        provisioning_ttl_s: float,
        tree_timeout_s: float = 30.0,
        erase_batch: int = 500,
        max_reply_bytes: int = MAX_MESSAGE_BYTES,
        on_hidden: Callable[[], None] = lambda: None,
    ) -> None:
        self._repo = repository
        self._max_reply_bytes = max_reply_bytes
        self._max_tree_nodes = max_tree_nodes
        self._tree_timeout_s = tree_timeout_s
        self._provisioning_ttl_s = provisioning_ttl_s
        self._erase_batch = erase_batch
        # Called after a DeleteSubtree hid sessions: wakes the erasure job.
        self._on_hidden = on_hidden
        self._page_token_key: bytes | None = None

    # -- creation -----------------------------------------------------------

    async def create_session(self, new: NewSession) -> Node:
        """Create a root or a child (visible at once, or provisional); the only id birthplace."""
        label = new.label
        if label is None:
            label = ROOT_LABEL if new.parent_id is None else CHILD_LABEL
        spec = SessionSpec(
            parent_id=new.parent_id,
            label=label,
            source_id=new.source_session_id,
            provisional_ttl_s=self._provisioning_ttl_s if new.provisional else None,
            config=None if new.config is None else config_to_json(new.config),
            metadata=new.metadata,
            copy_source_metadata=new.copy_source_metadata,
        )

        if not new.request_id:
            return await self._repo.transaction(lambda tx: self._create(tx, new, spec))
        try:
            return await self._repo.transaction(lambda tx: self._create_once(tx, new, spec))
        except Answered as answered:
            return decode_node(answered.response)
        except (NotFound, FailedPrecondition):
            # A retry whose work can no longer succeed (its parent went since) still gets
            # the first call's answer.
            entry = await self._repo.stored(new.space_id, CREATE_SCOPE, new.request_id)
            if entry is None:
                raise
            return decode_node(answer_of(entry, new.request_id, new.request_hash))

    @staticmethod
    async def _create(tx: TreeTx, new: NewSession, spec: SessionSpec) -> Node:
        if new.parent_id is not None and not new.provisional:
            # A visible child takes its index now, under the parent's row lock.
            if not await tx.lock_parent(new.space_id, new.parent_id):
                raise session_not_found(new.parent_id, "parent session")
        if spec.copy_source_metadata and new.source_session_id is not None:
            copied = await tx.metadata(new.space_id, new.source_session_id)
            pairs = metadata.merged(copied, spec.metadata, ())
            violations = Violations()
            metadata.check_size(pairs, violations, "metadata", merged_with="its source's pairs")
            violations.raise_if_any()
            spec = replace(spec, metadata=pairs)
        return await tx.create_session(new.space_id, uuid.uuid4(), spec)

    @classmethod
    async def _create_once(cls, tx: TreeTx, new: NewSession, spec: SessionSpec) -> Node:
        """The work, then its key in one insert; a live key (a retry, or a concurrent call
        that committed first: the insert waits for it) rolls the work back for its answer."""
        node = await cls._create(tx, new, spec)
        await tx.remember_or_answer(
            new.space_id,
            CREATE_SCOPE,
            new.request_id,
            new.request_hash,
            encode_node(node),
            sessions=(node.id,),
        )
        return node

    async def commit_session(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[Node, dict[str, str]]:
        """Make a provisional session visible with the next index; idempotent. Its node and
        its metadata."""

        async def work(tx: TreeTx) -> tuple[Node, dict[str, str]]:
            locked = await tx.lock_for_commit(space_id, session_id)
            if locked is None:
                raise session_not_found(session_id)
            provisional, metadata = locked
            if provisional:
                return await tx.commit_session(space_id, session_id), metadata
            node = await tx.node(space_id, session_id)
            assert node is not None
            return node, metadata

        return await self._repo.transaction(work)

    # -- reads --------------------------------------------------------------

    async def get_node(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node:
        """A visible session's node."""
        node = await self._repo.node(space_id, session_id)
        if node is None:
            raise session_not_found(session_id)
        return node

    async def get_node_with_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[Node, SessionConfig | None, dict[str, str]]:
        """A visible session's node, its stored config (None when never written) and its
        metadata."""
        found = await self._repo.node_with_config(space_id, session_id)
        if found is None:
            raise session_not_found(session_id)
        node, stored, pairs = found
        return node, None if stored is None else config_from_json(stored), pairs

    async def list_roots(self, space_id: uuid.UUID) -> list[Node]:
        """Every root of the space by (created_at, id)."""
        return await self._repo.roots(space_id)

    async def list_all(self, query: PageQuery) -> SummaryPage:
        """One page of every session of the space by (created_at, id)."""
        binding = listing_binding(query.space_id, query.status, query.filter)
        after = decode_page_token(query.page_token, binding) if query.page_token else None
        rows = await self._repo.summaries(
            query.space_id, query.status, query.filter, query.page_size + 1, after
        )
        if len(rows) <= query.page_size:
            return SummaryPage(tuple(rows), "")
        page = tuple(rows[: query.page_size])
        return SummaryPage(page, encode_page_token(page[-1].created_at, page[-1].id, binding))

    async def get_children(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """A session's visible children by index."""

        async def work(tx: TreeTx) -> list[Node]:
            visible, _ = await tx.visible_parent(space_id, session_id)
            if not visible:
                raise session_not_found(session_id)
            return await tx.children(space_id, session_id)

        return await self._repo.transaction(work)

    async def get_siblings(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """The parent's other visible children by index; [] for a root."""

        async def work(tx: TreeTx) -> list[Node]:
            visible, parent_id = await tx.visible_parent(space_id, session_id)
            if not visible:
                raise session_not_found(session_id)
            if parent_id is None:
                return []
            return await tx.children(space_id, parent_id, without=session_id)

        return await self._repo.transaction(work)

    async def get_ancestors(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """The ancestors nearest first; [] for a root."""
        chain = await self._repo.ancestry(space_id, session_id)
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
        chain = await self._repo.ancestor_page(space_id, session_id, start, page_size)
        if chain is None:
            if start != session_id and await self._repo.visible(space_id, session_id):
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
            self._page_token_key = await self._repo.token_key()
        return self._page_token_key

    async def get_tree(self, query: TreeQuery) -> list[TreeRow]:
        """The forest (or one subtree) in pre-order, capped at max_tree_nodes."""
        cap = self._max_tree_nodes
        try:
            rows = await self._repo.tree_rows(
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

    async def resolve_prefix(self, space_id: uuid.UUID, digits: str, limit: int) -> list[Summary]:
        """Up to `limit` visible sessions whose id starts with the hex `digits`, by id."""
        low, high = prefix_range(digits)
        return await self._repo.by_prefix(space_id, low, high, limit)

    # -- refs, status, label, config ----------------------------------------

    async def add_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> Node:
        """Add `from -> to` unless present; refuses self, ancestors and descendants (an end
        not visible in the space is NOT_FOUND first, a self-reference included)."""

        async def work(tx: TreeTx) -> Node:
            ends = await tx.ref_ends(space_id, (from_id, to_id))
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
                if to_depth < from_depth and await tx.is_ancestor(space_id, from_id, to_id):
                    raise FailedPrecondition(
                        f"session {to_id} is an ancestor of {from_id}",
                        reason=REF_TO_ANCESTOR,
                        metadata={"subject": f"session/{to_id}"},
                    )
                if to_depth > from_depth and await tx.is_ancestor(space_id, to_id, from_id):
                    raise FailedPrecondition(
                        f"session {to_id} is a descendant of {from_id}",
                        reason=REF_TO_DESCENDANT,
                        metadata={"subject": f"session/{to_id}"},
                    )
            if not await tx.lock_ref_source(space_id, from_id):
                raise session_not_found(from_id)
            if await tx.insert_ref(space_id, from_id, to_id):
                await tx.touch(space_id, from_id)
            return await _visible_node(tx, space_id, from_id)

        return await self._repo.transaction(work)

    async def remove_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> Node:
        """Remove `from -> to` if present; idempotent."""

        async def work(tx: TreeTx) -> Node:
            ends = await tx.ref_ends(space_id, (from_id, to_id))
            for session_id in (from_id, to_id):
                if session_id not in ends:
                    raise session_not_found(session_id)
            if await tx.delete_ref(space_id, from_id, to_id):
                await tx.touch(space_id, from_id)
            return await _visible_node(tx, space_id, from_id)

        return await self._repo.transaction(work)

    async def set_status(self, space_id: uuid.UUID, session_id: uuid.UUID, status: Status) -> Node:
        """Archive or unarchive one session (never cascades); idempotent."""

        async def work(tx: TreeTx) -> Node:
            await tx.set_status(space_id, session_id, status)
            return await _visible_node(tx, space_id, session_id)

        return await self._repo.transaction(work)

    async def update_label(self, space_id: uuid.UUID, session_id: uuid.UUID, label: str) -> Node:
        """Replace the label of an active session."""

        async def work(tx: TreeTx) -> Node:
            status = await tx.lock_status(space_id, session_id)
            if status is None:
                raise session_not_found(session_id)
            if status == "archived":
                raise FailedPrecondition(
                    f"session {session_id} is archived; unarchive it to rename it",
                    reason=SESSION_ARCHIVED,
                    metadata={"subject": f"session/{session_id}"},
                )
            return await tx.set_label(space_id, session_id, label)

        return await self._repo.transaction(work)

    async def update_metadata(self, change: MetadataChange) -> dict[str, str]:
        """Write and remove a visible session's metadata in one transaction, the limits
        checked on the result first; the metadata as it now is."""

        async def work(tx: TreeTx) -> dict[str, str]:
            if not await tx.lock_metadata(change.space_id, change.session_id):
                raise session_not_found(change.session_id)
            current = await tx.metadata(change.space_id, change.session_id)
            result = metadata.merged(current, change.set, change.remove)
            if result == current:
                return current
            violations = Violations()
            metadata.check_size(result, violations, "set", merged_with="its own pairs")
            violations.raise_if_any()
            written = {k: v for k, v in change.set.items() if current.get(k) != v}
            removed = [k for k in change.remove if k in current]
            await tx.change_metadata(change.space_id, change.session_id, written, removed)
            return result

        return await self._repo.transaction(work)

    async def get_config(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionConfig | None:
        """The stored config, or None when none was ever written."""
        visible, stored = await self._repo.config(space_id, session_id)
        if not visible:
            raise session_not_found(session_id)
        return None if stored is None else config_from_json(stored)

    async def put_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID, config: SessionConfig
    ) -> SessionConfig:
        """Overwrite the whole config; the config as stored."""

        async def work(tx: TreeTx) -> SessionConfig:
            stored = await tx.put_config(space_id, session_id, config_to_json(config))
            if stored is None:
                raise session_not_found(session_id)
            return config_from_json(stored)

        return await self._repo.transaction(work)

    # -- erasure and provisioning -------------------------------------------

    async def delete_subtree(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        *,
        count_only: bool = False,
        reply_limit: int = 0,
        deadline: float | None = None,
    ) -> list[uuid.UUID]:
        """Hide a session and its descendants from every read and write in one transaction
        (their SUBTREE_DELETED events with it) and wake the erasure job, which erases them
        and all they own in batches; the ids, the session first (DESIGN §4.8).

        Unless `count_only` (the reply then carries their count alone), a subtree whose ids
        would not fit the reply (`reply_limit`, the caller's `max_reply_bytes`, under the
        server's own; 0 = the server's) is refused before anything is hidden, and again
        before the commit if the sessions found late make it so: the transaction rolls back.

        The caller's `deadline` (a `time.monotonic()` time) bounds every statement (a wait
        for a row lock ends at it: `TreeRepository.transaction`) and is checked before the
        commit: passed, the transaction rolls back (DEADLINE_EXCEEDED, nothing hidden) and
        its connection goes back to the pool. The caller
        leaving meanwhile does not cut the transaction (`stello.tasks.to_the_end`): it ends
        rolled back, or committed when the deadline passed during the commit itself, and
        the log says which.
        """
        fits = ReplyFit(self._max_reply_bytes, reply_limit, session_id, count_only)

        async def work(tx: TreeTx) -> list[uuid.UUID]:
            locked = await tx.lock_subtree(space_id, session_id)
            if not locked:
                raise session_not_found(session_id)
            fits.check(len(locked))
            await tx.bound()
            hidden = await tx.hide_subtree(space_id, session_id, locked)
            fits.check(len(hidden))
            if deadline is not None and time.monotonic() >= deadline:
                raise deadline_passed()
            return hidden

        def said(done: asyncio.Future[list[uuid.UUID]]) -> None:
            if ended_well(done):
                self._on_hidden()
                log.info("DeleteSubtree of %s: committed as its caller left", session_id)
            elif done.cancelled():
                log.info("DeleteSubtree of %s: cancelled, rolled back", session_id)
            elif isinstance(done.exception(), DeadlineExceeded):
                log.info(
                    "DeleteSubtree of %s: its caller's deadline passed before the commit; "
                    "rolled back, nothing deleted",
                    session_id,
                )
            else:
                log.error(
                    "DeleteSubtree of %s failed after its caller left; rolled back",
                    session_id,
                    exc_info=done.exception(),
                )

        hidden = await to_the_end(self._repo.transaction(work, deadline), said)
        self._on_hidden()
        return hidden

    async def erase_hidden(
        self, *, wait: bool = False, space_id: uuid.UUID | None = None
    ) -> int | None:
        """Erase every session DeleteSubtree hid (with `space_id`, in that space alone, every
        statement pinned to it), batch by batch (deepest first, each batch its own
        transaction); how many went, None when another replica is erasing (or when, without
        `wait`, rows it needed stayed held by others: the next round goes on)."""
        erased = 0
        while True:
            batch = await self._repo.erase_batch(self._erase_batch, wait=wait, space_id=space_id)
            if batch is None:
                return erased or None
            if batch == 0:
                break
            erased += batch
        if erased and space_id is None:
            log.debug("erased %d deleted sessions", erased)  # routine: every DeleteSubtree
        elif erased:
            log.info("erased %d deleted sessions of space %s", erased, space_id)
        return erased

    async def spaces(self) -> list[SpaceNode]:
        """Every space: what a round done space by space goes over."""
        return await self._repo.spaces()

    async def erase_space(self, space_id: uuid.UUID) -> int | None:
        """`erase_hidden` in one space: the erasure's fallback when its look across spaces
        fails (a node out of reach, `Eraser`)."""
        return await self.erase_hidden(space_id=space_id)

    async def sweep_space(self, space_id: uuid.UUID) -> int | None:
        """`sweep_expired` in one space (its request keys' purge aside): the sweep's
        fallback when its read across spaces fails (`Sweeper`); how many sessions went."""
        removed: list[SweptSession] = []
        while batch := await self._repo.sweep(0.0, SWEEP_BATCH, wait=False, space_id=space_id):
            removed.extend(batch)
        _log_swept(removed)
        return len(removed)

    async def sweep(self, query: SweepQuery) -> list[SweptSession]:
        """Admin sweep: remove (or list) due provisional sessions of every space."""
        if query.dry_run:
            return await self._repo.due(query.older_than_s, MAX_DRY_RUN)
        removed: list[SweptSession] = []
        while True:
            # A batch comes back short when a CommitSession holds one of its sessions (it
            # is skipped), not only at the end: the sweep goes on until one removes none.
            batch = await self._repo.sweep(query.older_than_s, SWEEP_BATCH, wait=True)
            if not batch:
                break
            removed.extend(batch)
        _log_swept(removed)
        return removed

    async def sweep_expired(self) -> list[SweptSession] | None:
        """One periodic sweep of expired provisional sessions; None if another replica sweeps."""
        removed: list[SweptSession] = []
        while True:
            # As the admin sweep: on until a batch removes none (a held session shortens one).
            batch = await self._repo.sweep(0.0, SWEEP_BATCH, wait=False)
            if batch is None:
                return removed or None
            if not batch:
                break
            removed.extend(batch)
        await self._repo.purge_idempotency_keys()
        _log_swept(removed)
        return removed


async def _visible_node(tx: TreeTx, space_id: uuid.UUID, session_id: uuid.UUID) -> Node:
    node = await tx.node(space_id, session_id)
    if node is None:
        raise session_not_found(session_id)
    return node


def _log_swept(removed: list[SweptSession]) -> None:
    if removed:
        log.info("swept %d provisional sessions", len(removed))


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
