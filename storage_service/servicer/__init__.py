"""stello.storage.v1.SessionStorage's gRPC face: proto <-> domain, one service call per RPC.

- `storage`: `SessionStorageServicer`, the rooms' services and the RPCs of sessions,
  records, search, Transact and the event log;
- `slots`, `memory`, `claims`, `turns`: the slot, shared memory, fork and job claim,
  and turn lease RPCs, mixed into it.
"""

from __future__ import annotations

from storage_service.servicer.storage import SessionStorageServicer

__all__ = ["SessionStorageServicer"]
