"""The gateway reads whole histories page by page, however short byte-bounded pages are."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import pytest

from agent_gateway.app import create_app
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from storage_service.app import create_app as storage_app
from storage_service.config import StorageSettings
from tests.gateway.conftest import (
    TTL_S,
    Backends,
    FakeSummarizer,
    Stack,
    close_stack,
    open_stack,
    record,
)
from tests.support.fixtures import ServerStarter, TestSpace
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

pytestmark = pytest.mark.sql

INHERIT = common_pb2.FORK_CONTEXT_INHERIT


@pytest.fixture(name="paged_stack")
async def _paged_stack(
    start_server: ServerStarter, space: TestSpace, summarizer: FakeSummarizer
) -> AsyncIterator[Stack]:
    """A gateway over a storage whose ListRecords pages carry at most 1 KiB of records."""
    tree_config = TreeSettings(provisioning_ttl_s=TTL_S)
    storage = await start_server(partial(storage_app, config=StorageSettings(max_page_bytes=1024)))
    tree = await start_server(partial(tree_app, config=tree_config))
    backends = Backends(storage, tree, tree_config)
    gateway = await start_server(
        partial(create_app, config=backends.gateway_config(), summarizer=summarizer)
    )
    stack = await open_stack(backends, gateway, space, summarizer)
    yield stack
    await close_stack(stack)


async def every_record(stack: Stack, session_id: str) -> list[str]:
    """The contents of all pages of a session's records, through the gateway."""
    found: list[str] = []
    token = ""
    while True:
        reply = await stack.gw.ListRecords(
            agent_pb2.ListRecordsRequest(
                space_id=stack.space.sid, session_id=session_id, page_token=token
            )
        )
        assert len(reply.records) == 1  # one 600-character record fills a 1 KiB page
        found += [r.content for r in reply.records]
        token = reply.next_page_token
        if not token:
            return found


async def test_inherit_reads_every_page(paged_stack: Stack) -> None:
    """Fork INHERIT copies all records though each storage page holds one (was: the first)."""
    source = await paged_stack.root()
    contents = [f"{n}" + "z" * 600 for n in range(5)]
    await paged_stack.append(source.id, *(record("user", c) for c in contents))
    child = await paged_stack.fork(source.id, context=INHERIT)
    assert await every_record(paged_stack, child.id) == contents
    cut = await paged_stack.fork(source.id, context=INHERIT, inherit_until_seq=3)
    assert await every_record(paged_stack, cut.id) == contents[:3]
