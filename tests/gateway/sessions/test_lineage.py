"""GetLineage (DESIGN §4.5): a session's ancestors nearest first with memory and insight, paged."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.errors import field_violations
from tests.gateway.conftest import (
    Counted,
    Stack,
    new_id,
    rpc_error,
)
from tests.support.fixtures import new_space
from tests.tree.seed import chain, seed_topology

pytestmark = pytest.mark.sql


async def lineage(stack: Stack, session_id: str, size: int = 0, token: str = "") -> Any:
    """One GetLineage page."""
    return await stack.gw.GetLineage(
        agent_pb2.GetLineageRequest(
            space_id=stack.space.sid, session_id=session_id, page_size=size, page_token=token
        )
    )


class TestLineage:
    async def test_a_thousand_deep_chain_each_ancestor_once_two_calls_a_page(
        self, counted: Counted, pool: asyncpg.Pool
    ) -> None:
        """Over 1,000 ancestors, pages of 100 give each once nearest first with its slots,
        each page one tree ListAncestors and one storage BatchGetSlots."""
        stack, clients = counted.stack, counted.clients
        ids = await seed_topology(pool, stack.space.id, chain(1001))
        slots = [(stack.space.id, ids[i], f"memory {i}", f"insight {i}") for i in range(0, 1000, 3)]
        async with pool.acquire() as con:
            await con.copy_records_to_table(
                "session_slots",
                records=slots,
                columns=["space_id", "session_id", "memory", "insight"],
            )
        clients.tree.calls.clear()
        clients.storage.calls.clear()
        seen: list[Any] = []
        token, pages = "", 0
        while True:
            reply = await lineage(stack, str(ids[-1]), 100, token)
            pages += 1
            seen += reply.ancestors
            token = reply.next_page_token
            if not token:
                break
        assert pages == 10
        assert [a.id for a in seen] == [str(i) for i in reversed(ids[:-1])]
        assert dict(clients.tree.calls) == {"ListAncestors": pages}
        assert dict(clients.storage.calls) == {"BatchGetSlots": pages}
        by_label = {a.label: a for a in seen}
        assert (by_label["n3"].memory, by_label["n3"].insight) == ("memory 3", "insight 3")
        assert not by_label["n4"].HasField("memory") and not by_label["n4"].HasField("insight")
        assert by_label["n5"].parent_id == str(ids[4])
        assert not by_label["n0"].HasField("parent_id")

    async def test_a_fork_chain_through_the_rpcs(self, stack: Stack) -> None:
        """Forks of forks: the lineage of the last is its parents, with status and turns."""
        root = await stack.root(label="root")
        mid = await stack.fork(root.id, label="mid")
        leaf = await stack.fork(mid.id, label="leaf")
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=root.id, content="m")
        )
        await stack.gw.PutInsight(
            agent_pb2.PutInsightRequest(space_id=stack.space.sid, session_id=mid.id, content="i")
        )
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        reply = await lineage(stack, leaf.id)
        assert [(a.label, a.status) for a in reply.ancestors] == [
            ("mid", 1),
            ("root", 2),
        ]
        assert reply.ancestors[0].insight == "i" and reply.ancestors[1].memory == "m"
        assert reply.next_page_token == ""
        again = await lineage(stack, leaf.id)
        assert again.ancestors[0].insight == "i"  # reading does not consume it
        assert list((await lineage(stack, root.id)).ancestors) == []

    async def test_refusals(self, stack: Stack, keys: Any) -> None:
        """Unknown or foreign sessions are NOT_FOUND; a bad page size or token is refused."""
        root = await stack.root()
        error = await rpc_error(lineage(stack, new_id()))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        for size, token, field in ((1001, "", "page_size"), (0, "bogus", "page_token")):
            error = await rpc_error(lineage(stack, root.id, size, token))
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in field_violations(error)] == [field]
        other = await new_space(keys)
        async with stack.gateway.channel(other.key) as channel:
            gw = agent_pb2_grpc.AgentGatewayStub(channel)
            error = await rpc_error(
                gw.GetLineage(agent_pb2.GetLineageRequest(space_id=other.sid, session_id=root.id))
            )
        assert error.code() is grpc.StatusCode.NOT_FOUND
