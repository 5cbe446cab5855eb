"""stello.agent.v1.AgentGateway: proto <-> domain, one domain call per RPC (STYLE §2).

- `gateway`: `AgentGatewayServicer`, the RPCs of sessions, forks and turns;
- `memory`, `skills`, `lineage`: the shared memory, ListSkills and GetLineage
  RPCs, mixed into it;
- `replies`: domain values -> reply messages;
- `callers`: who an RPC acts for (key, deadline, request id from the interceptors).
"""

from __future__ import annotations

from agent_gateway.servicer.gateway import AgentGatewayServicer

__all__ = ["AgentGatewayServicer"]
