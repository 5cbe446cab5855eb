"""A session's slots: the insight, the memory and its consolidation by the model."""

from __future__ import annotations

from stello.agent.v1 import agent_pb2
from stello_client.base import DEFAULT, ClientBase, Timeout
from stello_client.requests import request_of


class SlotCalls(ClientBase):
    """PutInsight, PutMemory and Consolidate."""

    async def put_insight(
        self, session_id: str, content: str, *, timeout: Timeout = DEFAULT
    ) -> None:
        """Replace the insight: a note the next committed turn reads once (PutInsight).

        Raises:
            NotFound: the session is not in the space.
            SessionArchived: the session is archived.
        """
        request = request_of(
            agent_pb2.PutInsightRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            content=content,
        )
        await self._unary("PutInsight", request, safe=False, timeout=timeout)

    async def put_memory(
        self, session_id: str, content: str, *, timeout: Timeout = DEFAULT
    ) -> None:
        """Replace the session's memory, never sent to the model (PutMemory).

        Raises:
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.PutMemoryRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            content=content,
        )
        await self._unary("PutMemory", request, safe=False, timeout=timeout)

    async def consolidate(
        self, session_id: str, *, timeout: Timeout = DEFAULT
    ) -> agent_pb2.ConsolidateResponse:
        """Rewrite the session's memory with the model (Consolidate). The reply holds the
        memory (unset: none) and how far it got: `status` (JOB_STATUS_BUDGET_SPENT when it
        stopped at the gateway's model-call budget; call again to continue),
        `covered_until_seq`, `last_seq`, `model_calls`. Not retried: it calls the model.

        Raises:
            NotFound: the session is not in the space.
            SessionArchived: the session is archived.
        """
        request = request_of(
            agent_pb2.ConsolidateRequest, space_id=await self.space_id(), session_id=session_id
        )
        reply: agent_pb2.ConsolidateResponse = await self._unary(
            "Consolidate", request, safe=False, timeout=timeout, turn=True
        )
        return reply
