"""stello.agent.v1.AgentGateway: proto <-> domain, one domain call per RPC (STYLE §2).

- `gateway`: `AgentGatewayServicer`, the RPCs of one session (reads, slot writes,
  archive, delete, label, Consolidate), ListProfiles and WhoAmI;
- `provisioning`, `turns`, `reads`, `watch`: CreateRoot, Fork and ImportSession; the
  turn RPCs; the listings and searches; WatchSpace — mixed into it;
- `memory`, `skills`, `lineage`, `metadata`, `retention`: the shared memory, ListSkills,
  GetLineage, UpdateSessionMetadata and retention RPCs, mixed into it too;
- `replies`: domain values -> reply messages;
- `callers`: who an RPC acts for (key, deadline, request id from the interceptors).
"""

from __future__ import annotations

from agent_gateway.servicer.gateway import AgentGatewayServicer

__all__ = ["AgentGatewayServicer"]
