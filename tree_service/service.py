"""The session tree's domain logic: each room's service, built together over one repository.

`TreeService` knows nothing of gRPC: its rooms take validated domain inputs
(`tree_service.models`), decide what exists and what is allowed, and run each unit
of work in one transaction through `TreeRepository` (`tree_service.unit`). The
servicer calls one room's method per RPC.
"""

from __future__ import annotations

from collections.abc import Callable

from stello.settings import MAX_MESSAGE_BYTES
from tree_service.erasure.service import ErasureService
from tree_service.nodes.service import NodeService
from tree_service.refs.service import RefService
from tree_service.sessions.service import SessionService
from tree_service.sweep.service import SweepService
from tree_service.trees.service import ForestService
from tree_service.unit import TreeRepository


class TreeService:
    """Every SessionTree operation, a room's service each, over one repository."""

    __slots__ = ("erasure", "nodes", "refs", "sessions", "sweeps", "trees")

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
        self.nodes = NodeService(repository)
        """GetNode, ListRoots, GetChildren, GetSiblings, the ancestors, ListAll, prefixes."""
        self.trees = ForestService(
            repository, max_tree_nodes=max_tree_nodes, tree_timeout_s=tree_timeout_s
        )
        """GetTree."""
        self.sessions = SessionService(repository, provisioning_ttl_s=provisioning_ttl_s)
        """CreateSession, CommitSession, status, label, metadata and config."""
        self.refs = RefService(repository)
        """AddRef and RemoveRef."""
        self.erasure = ErasureService(
            repository,
            erase_batch=erase_batch,
            max_reply_bytes=max_reply_bytes,
            on_hidden=on_hidden,
        )
        """DeleteSubtree and the erasure job's rounds."""
        self.sweeps = SweepService(repository)
        """The provisional sweep (SweepProvisional and the periodic one)."""
