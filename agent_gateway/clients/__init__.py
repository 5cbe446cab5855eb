"""The gateway's only way to data: typed clients of storage and tree, and their call path.

- `rpc`: who calls and how (the caller's key and deadline forwarded, bounded
  retries on UNAVAILABLE, status codes back to the kernel's domain errors);
- `storage`: one method per SessionStorage RPC, with the mixins:
  - `memory`: the memory and insight slots and the shared memory entries;
  - `remembered`: the remembered-reply key, its Transact operation and reads;
  - `jobs`: the background runner's storage calls (claims, renewals, progress);
- `tree`: one method per SessionTree RPC.

Nothing above this package opens a channel or touches a table.
"""

from __future__ import annotations

from agent_gateway.clients.remembered import RequestKey, remember_op
from agent_gateway.clients.rpc import Caller, CallPolicy
from agent_gateway.clients.storage import ALL_SLOTS, StorageClient
from agent_gateway.clients.tree import TreeClient

__all__ = [
    "ALL_SLOTS",
    "CallPolicy",
    "Caller",
    "RequestKey",
    "StorageClient",
    "TreeClient",
    "remember_op",
]
