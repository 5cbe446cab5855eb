"""Fork and CreateRoot in few internal calls (#18): a Fork NONE or INHERIT is tree GetConfig,
then the saga's tree CreateSession, storage Transact and tree CommitSession (4 calls; the
source's prompt slot is copied inside the Transact, not read first); a CreateRoot is the saga
alone (3). A client request_id adds storage GetRememberedResult, looked up beside the read.
Counted on the gateway's own clients (attempts included), over real servers."""

from __future__ import annotations

import uuid

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import (
    Counted,
    record,
    rpc_error,
)

pytestmark = pytest.mark.sql

SAGA_TREE = {"CreateSession": 1, "CommitSession": 1}
FORK_TREE = {"GetConfig": 1, **SAGA_TREE}
INHERIT = common_pb2.FORK_CONTEXT_INHERIT


class TestFork:
    async def test_none_keeps_the_source_prompt_in_four_calls(self, counted: Counted) -> None:
        """A Fork NONE with no prompt of its own keeps the source's system prompt slot: copied
        in the Transact, never read (GetConfig, CreateSession, Transact, CommitSession)."""
        stack = counted.stack
        root = await stack.root(system_prompt="be brief")
        await stack.storage.PutSystemPrompt(
            storage_pb2.PutSystemPromptRequest(
                space_id=stack.space.sid, session_id=root.id, content="the slot's own"
            )
        )
        counted.clear()
        child = await stack.fork(root.id, "c")
        assert counted.calls() == ({"Transact": 1}, FORK_TREE)
        view = await stack.view(child.id)
        # The source's config gives the prompt, so the composition writes it (not the slot).
        assert view.system_prompt == "be brief"

    async def test_a_source_prompt_only_in_the_slot_is_copied(
        self, counted: Counted, pool: asyncpg.Pool
    ) -> None:
        """No layer gives a prompt (the source's config has none): the child gets the source's
        slot, still in four calls; a source without one leaves the child without."""
        stack = counted.stack
        root = await stack.root(system_prompt="in the config")
        async with pool.acquire() as con:
            await con.execute(
                "DELETE FROM session_configs WHERE space_id = $1 AND session_id = $2",
                stack.space.id,
                uuid.UUID(root.id),
            )
        bare = await stack.root()
        counted.clear()
        child = await stack.fork(root.id, "c")
        empty = await stack.fork(bare.id, "e")
        storage, tree = counted.calls()
        assert storage == {"Transact": 2}
        assert tree == {name: 2 * n for name, n in FORK_TREE.items()}
        assert (await stack.view(child.id)).system_prompt == "in the config"
        assert not (await stack.view(empty.id)).HasField("system_prompt")

    async def test_inherit_in_four_calls(self, counted: Counted) -> None:
        """A Fork INHERIT reads no record and no slot: the same four calls."""
        stack = counted.stack
        root = await stack.root(system_prompt="sys")
        await stack.append(root.id, record("user", "a"), record("assistant", "b"))
        counted.clear()
        child = await stack.fork(root.id, "c", context=INHERIT, prompt="opening")
        assert counted.calls() == ({"Transact": 1}, FORK_TREE)
        assert [r.content for r in await stack.records(child.id)] == ["a", "b", "opening"]

    async def test_a_request_id_adds_one_lookup(self, counted: Counted) -> None:
        """With a client request_id the remembered lookup runs beside the read; the retry is
        answered from it and the saga's commit alone (no new session)."""
        stack = counted.stack
        root = await stack.root()
        counted.clear()
        first = await stack.fork(root.id, "c", request_id="r1")
        assert counted.calls() == ({"GetRememberedResult": 1, "Transact": 1}, FORK_TREE)
        counted.clear()
        again = await stack.fork(root.id, "c", request_id="r1")
        assert again.id == first.id
        storage, tree = counted.calls()
        assert "Transact" not in storage and "CreateSession" not in tree

    async def test_an_unknown_source_writes_nothing(self, counted: Counted) -> None:
        """NOT_FOUND from the read, before any write."""
        stack = counted.stack
        counted.clear()
        error = await rpc_error(stack.fork(str(uuid.uuid4()), "c"))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        storage, tree = counted.calls()
        assert storage == {} and set(tree) == {"GetConfig"}


class TestCreateRoot:
    async def test_three_calls(self, counted: Counted) -> None:
        """CreateRoot is the saga alone: CreateSession, Transact, CommitSession."""
        stack = counted.stack
        counted.clear()
        root = await stack.root(system_prompt="sys")
        assert counted.calls() == ({"Transact": 1}, SAGA_TREE)
        assert (await stack.view(root.id)).system_prompt == "sys"
