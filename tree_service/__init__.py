"""The Stello tree service: SessionTree, the topology of sessions (DESIGN §2, §4.1).

The only place a session id is born; it writes parent, depth, sibling index,
root, source session and provisioning state, answers topology reads, keeps
refs and per-session configs, erases subtrees, sweeps abandoned
provisional sessions, and applies each space's retention policy.

Its rooms, each a folder with its SQL (`repository`) and its domain logic (`service`):
`nodes` (the topology reads, ListAll), `trees` (GetTree), `sessions` (creation, commit,
status, label, metadata, config), `refs`, `erasure` (DeleteSubtree and the erasure
job), `sweep` (the provisional sweep) and `retention`. At the top: `servicer` (gRPC),
`service` (the rooms' services together), `unit` (the pool's reads and one
transaction's unit of work), `sql` (what every room's statements share), `convert`,
`encoding`, `models`, `app`, `config`.
"""

from __future__ import annotations

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)
from tree_service.app import create_app, create_service, create_sweeper
from tree_service.config import TreeSettings
from tree_service.service import TreeService
from tree_service.sweep.sweeper import Sweeper

__all__ = [
    "Sweeper",
    "TreeService",
    "TreeSettings",
    "create_app",
    "create_service",
    "create_sweeper",
]
