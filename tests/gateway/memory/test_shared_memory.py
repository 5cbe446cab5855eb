"""The gateway's shared memory RPCs: storage's, passed through and checked first (DESIGN §4.5)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.errors import error_info_reason, field_violations
from stello.reasons import REQUEST_ID_REUSED
from stello.settings import StelloSettings
from tests.gateway.conftest import (
    Counted,
    Stack,
    rpc_error,
)
from tests.support.fixtures import new_space

pytestmark = pytest.mark.sql


async def upsert(stack: Stack, slug: str, summary: str = "s", body: str = "b", **extra: Any) -> Any:
    """UpsertSharedMemoryEntry through the gateway."""
    return await stack.gw.UpsertSharedMemoryEntry(
        agent_pb2.UpsertSharedMemoryEntryRequest(
            space_id=stack.space.sid, slug=slug, summary=summary, body=body, **extra
        )
    )


async def entries(stack: Stack, page_size: int = 0, page_token: str = "") -> Any:
    """One ListSharedMemory page through the gateway."""
    return await stack.gw.ListSharedMemory(
        agent_pb2.ListSharedMemoryRequest(
            space_id=stack.space.sid, page_size=page_size, page_token=page_token
        )
    )


class TestPassthrough:
    async def test_upsert_list_get_remove_round_trip(self, stack: Stack) -> None:
        """Entries written through the gateway are listed in order, read whole and removed."""
        first = await upsert(stack, "plan", "the plan", "Step 1, then step 2.")
        assert first.created and first.entry.body == "Step 1, then step 2."
        await upsert(stack, "notes", "loose notes", "n")
        replaced = await upsert(stack, "plan", "the new plan", "Step 3.")
        assert not replaced.created
        page = await entries(stack)
        assert [(e.slug, e.summary) for e in page.entries] == [
            ("plan", "the new plan"),
            ("notes", "loose notes"),
        ]
        assert page.total_count == 2 and not any(e.HasField("body") for e in page.entries)
        got = await stack.gw.GetSharedMemoryEntry(
            agent_pb2.GetSharedMemoryEntryRequest(space_id=stack.space.sid, slug="plan")
        )
        assert got.entry.body == "Step 3."
        removed = await stack.gw.RemoveSharedMemoryEntry(
            agent_pb2.RemoveSharedMemoryEntryRequest(space_id=stack.space.sid, slug="plan")
        )
        again = await stack.gw.RemoveSharedMemoryEntry(
            agent_pb2.RemoveSharedMemoryEntryRequest(space_id=stack.space.sid, slug="plan")
        )
        assert (removed.removed, again.removed) == (True, False)
        error = await rpc_error(
            stack.gw.GetSharedMemoryEntry(
                agent_pb2.GetSharedMemoryEntryRequest(space_id=stack.space.sid, slug="plan")
            )
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_pages_through_the_gateway(self, stack: Stack) -> None:
        """Paging by 2 over 3 entries gives every entry once."""
        for slug in ("a", "b", "c"):
            await upsert(stack, slug)
        first = await entries(stack, page_size=2)
        second = await entries(stack, page_size=2, page_token=first.next_page_token)
        assert [e.slug for e in (*first.entries, *second.entries)] == ["a", "b", "c"]
        assert second.next_page_token == ""

    async def test_request_ids_answer_retries_and_refuse_reuse(self, stack: Stack) -> None:
        """A retried upsert answers the first reply; a reused id with another request is refused."""
        first = await upsert(stack, "k", request_id="gw-1")
        assert await upsert(stack, "k", request_id="gw-1") == first
        error = await rpc_error(upsert(stack, "k", "other", request_id="gw-1"))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == REQUEST_ID_REUSED

    async def test_another_space_sees_none(self, stack: Stack, keys: Any) -> None:
        """A key of another space lists and reads none of this space's entries."""
        await upsert(stack, "mine")
        other = await new_space(keys)
        channel = stack.gateway.channel(other.key)
        try:
            gw = agent_pb2_grpc.AgentGatewayStub(channel)
            listed = await gw.ListSharedMemory(
                agent_pb2.ListSharedMemoryRequest(space_id=other.sid)
            )
            assert listed.total_count == 0
            error = await rpc_error(
                gw.GetSharedMemoryEntry(
                    agent_pb2.GetSharedMemoryEntryRequest(space_id=other.sid, slug="mine")
                )
            )
            assert error.code() is grpc.StatusCode.NOT_FOUND
        finally:
            await channel.close()


class TestCheckedFirst:
    @pytest.mark.parametrize(
        ("fields", "bad"),
        [
            pytest.param({"slug": "  "}, ["slug"], id="blank-slug"),
            pytest.param({"summary": "one\ntwo"}, ["summary"], id="two-line-summary"),
            pytest.param({"body": ""}, ["body"], id="empty-body"),
            pytest.param({"request_id": "r" * 201}, ["request_id"], id="long-request-id"),
        ],
    )
    async def test_a_bad_upsert_never_reaches_storage(
        self, counted: Counted, fields: dict[str, str], bad: list[str]
    ) -> None:
        """The gateway refuses what storage would, naming the client's fields, with no call."""
        stack, clients = counted.stack, counted.clients
        values = {"slug": "ok", "summary": "s", "body": "b"} | fields
        clients.storage.calls.clear()
        error = await rpc_error(upsert(stack, **values))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == bad
        assert not clients.storage.calls

    async def test_a_body_over_the_slot_limit_never_reaches_storage(
        self, counted: Counted, settings: StelloSettings
    ) -> None:
        """A body over STELLO_MAX_SLOT_BYTES is INVALID_ARGUMENT `body` before any call."""
        stack, clients = counted.stack, counted.clients
        clients.storage.calls.clear()
        error = await rpc_error(upsert(stack, "big", body="x" * (settings.max_slot_bytes + 1)))
        assert [v.field for v in field_violations(error)] == ["body"]
        assert not clients.storage.calls

    async def test_each_rpc_is_one_storage_call(self, counted: Counted) -> None:
        """List, get, upsert and remove each make exactly one storage call and no tree call."""
        stack, clients = counted.stack, counted.clients
        clients.storage.calls.clear()
        clients.tree.calls.clear()
        await upsert(stack, "k")
        await entries(stack)
        await stack.gw.GetSharedMemoryEntry(
            agent_pb2.GetSharedMemoryEntryRequest(space_id=stack.space.sid, slug="k")
        )
        await stack.gw.RemoveSharedMemoryEntry(
            agent_pb2.RemoveSharedMemoryEntryRequest(space_id=stack.space.sid, slug="k")
        )
        assert dict(clients.storage.calls) == {
            "UpsertSharedMemoryEntry": 1,
            "ListSharedMemory": 1,
            "GetSharedMemoryEntry": 1,
            "RemoveSharedMemoryEntry": 1,
        }
        assert not clients.tree.calls
