"""Stello's SessionStorage service: conversation meta, records, slots and turn leases.

`create_app` wires it for the kernel's server factory; ``python -m
storage_service`` runs it on its own (DESIGN §1, §2). Its rooms, one folder per
subsystem, each own their tables: `sessions`, `records`, `slots`, `turns`,
`memory`, `guard`, `jobs`, `events`, `keys`, `search`, and `transact` over them, most
with a `wire` module that checks their requests; `unit` hands a work function one
connection, one outbox and the repositories on them. At the top: `servicer` (the RPCs,
a module per subsystem mixed into one servicer), `parse` (the checks that depend on
configured limits), `convert`, `models`, `page_tokens`, `app`, `config`.
"""

from __future__ import annotations

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)
from storage_service.app import SERVICE_NAME, create_app
from storage_service.config import StorageSettings

__all__ = ["SERVICE_NAME", "StorageSettings", "create_app"]
