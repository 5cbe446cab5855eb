"""The gateway's session RPCs over real storage and tree (STELLO-SPEC §4.8, DESIGN §2, §5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.app import create_app as gateway_app
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.settings import StelloSettings
from tests.gateway.conftest import (
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    StackMaker,
    close_stack,
    gateway_clients,
    new_id,
    open_stack,
    record,
    rpc_error,
)
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tests.tree.conftest import visible_count
from tests.tree.seed import fanout_tree, seed_topology

pytestmark = pytest.mark.sql

ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED


SMALL_GATEWAY_BYTES = 4096


@pytest.fixture(name="small_gateway")
async def _small_gateway(
    start_server: ServerStarter, backends: Backends, profiles_file: Path
) -> RunningServer:
    """A gateway whose STELLO_MAX_MESSAGE_BYTES (4,096) is below that of the services
    behind it."""
    config = backends.gateway_config(profiles_file=profiles_file)
    limit = {"max_message_bytes": SMALL_GATEWAY_BYTES}
    return await start_server(
        lambda s, p, k: gateway_app(s.model_copy(update=limit), p, k, config=config)
    )


def ids_request(stack: Stack, cls: type, session_id: str, **fields: object) -> object:
    """A request of `cls` for one session of the stack's space."""
    return cls(space_id=stack.space.sid, session_id=session_id, **fields)


async def digests(stack: Stack, **fields: Any) -> agent_pb2.ListSessionDigestsResponse:
    """One ListSessionDigests page."""
    reply: agent_pb2.ListSessionDigestsResponse = await stack.gw.ListSessionDigests(
        agent_pb2.ListSessionDigestsRequest(space_id=stack.space.sid, **fields)
    )
    return reply


class TestDigests:
    """ListSessionDigests: tree fields joined with storage slots, paged, filtered."""

    async def test_joined_digests_in_list_order(self, stack: Stack) -> None:
        """Digests come in (created_at, id) order with label, parent, status, memory and insight."""
        assert list((await digests(stack)).digests) == []
        root = await stack.root(label="a")
        child = await stack.fork(root.id, "b")
        await stack.gw.PutMemory(
            ids_request(stack, agent_pb2.PutMemoryRequest, root.id, content="m")
        )
        await stack.gw.PutInsight(
            ids_request(stack, agent_pb2.PutInsightRequest, child.id, content="i")
        )
        for _ in range(2):  # reading the insight does not consume it
            page = await digests(stack)
            assert [(d.id, d.label, d.status) for d in page.digests] == [
                (root.id, "a", ACTIVE),
                (child.id, "b", ACTIVE),
            ]
            first, second = page.digests
            assert not first.HasField("parent_id")
            assert second.parent_id == root.id
            assert (first.memory, first.HasField("insight")) == ("m", False)
            assert (second.HasField("memory"), second.insight) == (False, "i")
            assert page.next_page_token == ""

    async def test_status_filter(self, stack: Stack) -> None:
        """ACTIVE and ARCHIVED filters split the sessions; UNSPECIFIED lists all."""
        kept = await stack.root()
        gone = await stack.root()
        await stack.gw.Archive(ids_request(stack, agent_pb2.ArchiveRequest, gone.id))
        assert [d.id for d in (await digests(stack, status=ACTIVE)).digests] == [kept.id]
        assert [d.id for d in (await digests(stack, status=ARCHIVED)).digests] == [gone.id]
        assert len((await digests(stack)).digests) == 2

    async def test_two_calls_per_page(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        settings: StelloSettings,
        local_calls: bool,
    ) -> None:
        """Paging five sessions by two takes three pages, each one ListAll and one BatchGetSlots."""
        clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
        gateway = await start_gateway(clients=clients)
        stack = await open_stack(backends, gateway, space, summarizer)
        try:
            made = [(await stack.root(label=f"s{i}")).id for i in range(5)]
            clients.tree.calls.clear()
            clients.storage.calls.clear()
            seen: list[str] = []
            token = ""
            pages = 0
            while True:
                page = await digests(stack, page_size=2, page_token=token)
                pages += 1
                seen.extend(d.id for d in page.digests)
                token = page.next_page_token
                if not token:
                    break
            assert seen == made
            assert dict(clients.tree.calls) == {"ListAll": pages}
            assert dict(clients.storage.calls) == {"BatchGetSlots": pages}
        finally:
            await close_stack(stack)

    async def test_pages_stay_within_their_bytes(self, make_stack: StackMaker) -> None:
        """Digests whose memories outgrow STELLO_GATEWAY_MAX_PAGE_BYTES (here 5,000 bytes, six
        sessions of 2,000-byte memories) come in pages cut short, each within the bound and
        at least one digest, every session once and in order; a GetLineage page likewise.
        On main one page carried them all: with 1 MB memories, five made a page past a
        client's usual 4 MiB limit and 65 past the server's own (explore6 F11)."""
        stack = await make_stack(max_page_bytes=5_000)
        root = (await stack.root(label="r")).id
        made = [root]
        for i in range(5):
            made.append((await stack.fork(made[-1], label=f"f{i}")).id)
        for session in made:
            await stack.gw.PutMemory(
                agent_pb2.PutMemoryRequest(
                    space_id=stack.space.sid, session_id=session, content="m" * 2_000
                )
            )
        seen: list[str] = []
        sizes: list[int] = []
        token = ""
        while True:
            page = await digests(stack, page_token=token)
            sizes.append(page.ByteSize())
            seen.extend(d.id for d in page.digests)
            token = page.next_page_token
            if not token:
                break
        assert seen == made
        assert len(sizes) == 3 and max(sizes) <= 5_000, sizes
        ancestors = await stack.gw.GetLineage(
            agent_pb2.GetLineageRequest(space_id=stack.space.sid, session_id=made[-1])
        )
        assert [d.id for d in ancestors.ancestors] == list(reversed(made[3:5]))
        assert ancestors.next_page_token

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            pytest.param({"page_size": -1}, "page_size", id="negative"),
            pytest.param({"page_size": 1001}, "page_size", id="too-big"),
            pytest.param({"page_token": "garbage"}, "page_token", id="bad-token"),
            pytest.param({"status": 9}, "status", id="bad-status"),
        ],
    )
    async def test_invalid_paging(
        self, stack: Stack, fields: dict[str, object], field: str
    ) -> None:
        """Out-of-range page sizes, foreign tokens and unknown statuses are INVALID_ARGUMENT."""
        error = await rpc_error(digests(stack, **fields))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(error)]


class TestGetSession:
    """GetSession: the joined view."""

    async def test_joined_view(self, stack: Stack) -> None:
        """Node, meta, config and the three slots come together; the insight is not consumed."""
        root = await stack.root(system_prompt="sys", skills=common_pb2.SkillList())
        child = await stack.fork(root.id, "c")
        await stack.gw.PutInsight(
            ids_request(stack, agent_pb2.PutInsightRequest, root.id, content="i")
        )
        await stack.gw.PutMemory(
            ids_request(stack, agent_pb2.PutMemoryRequest, root.id, content="m")
        )
        view = await stack.view(root.id)
        assert (view.node.id, view.node.label, list(view.node.children)) == (
            root.id,
            "Root",
            [child.id],
        )
        assert view.turn_count == 0
        assert view.created_at == root.created_at
        assert view.config.system_prompt == "sys"
        assert view.config.HasField("skills") and list(view.config.skills.names) == []
        assert (view.system_prompt, view.memory, view.insight) == ("sys", "m", "i")
        assert (await stack.view(root.id)).insight == "i"

    async def test_unknown_and_foreign(self, stack: Stack, other_space: TestSpace) -> None:
        """An unknown id, or another space's session, is NOT_FOUND; a malformed id is invalid."""
        other = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        try:
            foreign = await other.root()
        finally:
            await close_stack(other)
        for session_id in (new_id(), foreign.id):
            error = await rpc_error(stack.view(session_id))
            assert error.code() is grpc.StatusCode.NOT_FOUND
        error = await rpc_error(stack.view("nope"))
        assert [v.field for v in field_violations(error)] == ["session_id"]


class TestTreeAndRecords:
    """GetTree and ListRecords pass through with the gateway's validation."""

    async def test_tree(self, stack: Stack) -> None:
        """Pre-order, narrowed by root_id and max_depth; unknown roots are NOT_FOUND."""
        root = await stack.root()
        a = await stack.fork(root.id, "a")
        a1 = await stack.fork(a.id, "a1")
        b = await stack.fork(root.id, "b")
        reply = await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid))
        assert [n.id for n in reply.nodes] == [root.id, a.id, a1.id, b.id]
        reply = await stack.gw.GetTree(
            agent_pb2.GetTreeRequest(space_id=stack.space.sid, root_id=a.id, max_depth=0)
        )
        assert [n.id for n in reply.nodes] == [a.id]
        error = await rpc_error(
            stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid, root_id=new_id()))
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND
        error = await rpc_error(
            stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid, max_depth=-1))
        )
        assert [v.field for v in field_violations(error)] == ["max_depth"]

    async def test_records(self, stack: Stack) -> None:
        """Role, bounds, limit/offset and newest_first behave as storage's ListRecords."""
        root = await stack.root()
        await stack.append(
            root.id, *(record("user" if i % 2 else "assistant", f"m{i}") for i in range(1, 7))
        )

        async def contents(**fields: object) -> list[str]:
            reply = await stack.gw.ListRecords(
                ids_request(stack, agent_pb2.ListRecordsRequest, root.id, **fields)
            )
            return [r.content for r in reply.records]

        assert await contents(limit=2, offset=1) == ["m2", "m3"]
        assert await contents(limit=2, newest_first=True) == ["m5", "m6"]
        assert await contents(role=common_pb2.RECORD_ROLE_USER) == ["m1", "m3", "m5"]
        assert await contents(after_seq=2, before_seq=5) == ["m3", "m4"]
        assert await contents(limit=0) == []
        for fields, field in (({"limit": -1}, "limit"), ({"offset": -1}, "offset")):
            error = await rpc_error(contents(**fields))
            assert field in [v.field for v in field_violations(error)]
        error = await rpc_error(contents(limit=1001))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT

    async def test_negative_seq_bounds_are_refused(self, stack: Stack) -> None:
        """A negative after_seq or before_seq is INVALID_ARGUMENT naming it (seqs start at 1,
        after_seq 0 = from the first); they were accepted, read as 0."""
        root = await stack.root()
        for fields, field in (({"after_seq": -1}, "after_seq"), ({"before_seq": -5}, "before_seq")):
            error = await rpc_error(
                stack.gw.ListRecords(
                    ids_request(stack, agent_pb2.ListRecordsRequest, root.id, **fields)
                )
            )
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert [(v.field, v.description) for v in field_violations(error)] == [
                (field, "must not be negative (seqs start at 1)")
            ]

    async def test_record_pages(self, stack: Stack, other_space: TestSpace) -> None:
        """next_page_token passes through both ways; a token elsewhere is INVALID_ARGUMENT."""
        root, other = await stack.root(), await stack.root()
        await stack.append(root.id, *(record("user", f"m{i}") for i in range(1, 8)))

        async def pages(**fields: Any) -> list[list[str]]:
            found, token = [], ""
            while True:
                reply = await stack.gw.ListRecords(
                    ids_request(
                        stack, agent_pb2.ListRecordsRequest, root.id, **fields, page_token=token
                    )
                )
                found.append([r.content for r in reply.records])
                token = reply.next_page_token
                if not token:
                    return found

        assert await pages(limit=3) == [["m1", "m2", "m3"], ["m4", "m5", "m6"], ["m7"]]
        assert await pages(limit=3, newest_first=True) == [
            ["m5", "m6", "m7"],
            ["m2", "m3", "m4"],
            ["m1"],
        ]
        first = await stack.gw.ListRecords(
            ids_request(stack, agent_pb2.ListRecordsRequest, root.id, limit=3)
        )
        error = await rpc_error(
            stack.gw.ListRecords(
                ids_request(
                    stack, agent_pb2.ListRecordsRequest, other.id, page_token=first.next_page_token
                )
            )
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["page_token"]
        theirs = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        try:
            for token, code in (
                (first.next_page_token, grpc.StatusCode.INVALID_ARGUMENT),
                ("", grpc.StatusCode.NOT_FOUND),
            ):
                request = ids_request(
                    theirs, agent_pb2.ListRecordsRequest, root.id, page_token=token
                )
                error = await rpc_error(theirs.gw.ListRecords(request))
                assert error.code() is code
        finally:
            await close_stack(theirs)


class TestWrites:
    """PutInsight, PutMemory, Archive, Unarchive, DeleteSession."""

    async def test_insight_refused_on_archived(self, stack: Stack) -> None:
        """PutInsight on an archived session is SESSION_ARCHIVED; PutMemory is allowed."""
        root = await stack.root()
        await stack.gw.Archive(ids_request(stack, agent_pb2.ArchiveRequest, root.id))
        error = await rpc_error(
            stack.gw.PutInsight(
                ids_request(stack, agent_pb2.PutInsightRequest, root.id, content="i")
            )
        )
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "SESSION_ARCHIVED"
        await stack.gw.PutMemory(
            ids_request(stack, agent_pb2.PutMemoryRequest, root.id, content="m")
        )
        view = await stack.view(root.id)
        assert (view.memory, view.HasField("insight")) == ("m", False)

    async def test_puts_on_unknown_session(self, stack: Stack) -> None:
        """PutInsight and PutMemory on an unknown session are NOT_FOUND."""
        for cls, rpc in (
            (agent_pb2.PutInsightRequest, "PutInsight"),
            (agent_pb2.PutMemoryRequest, "PutMemory"),
        ):
            error = await rpc_error(
                getattr(stack.gw, rpc)(ids_request(stack, cls, new_id(), content="x"))
            )
            assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_archive_unarchive(self, stack: Stack) -> None:
        """Archive and Unarchive answer the session as it now is, idempotently, never cascading."""
        root = await stack.root()
        child = await stack.fork(root.id)
        for _ in range(2):
            reply = await stack.gw.Archive(ids_request(stack, agent_pb2.ArchiveRequest, root.id))
            assert (reply.session.id, reply.session.status) == (root.id, ARCHIVED)
        assert (await stack.view(child.id)).node.status == ACTIVE
        reply = await stack.gw.Unarchive(ids_request(stack, agent_pb2.UnarchiveRequest, child.id))
        assert (reply.session.status, reply.session.parent_id) == (ACTIVE, root.id)
        reply = await stack.gw.Unarchive(ids_request(stack, agent_pb2.UnarchiveRequest, root.id))
        assert reply.session.status == ACTIVE
        error = await rpc_error(
            stack.gw.Archive(ids_request(stack, agent_pb2.ArchiveRequest, new_id()))
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_delete_subtree(self, stack: Stack) -> None:
        """DeleteSession erases the subtree, session first; forks elsewhere lose their source."""
        root = await stack.root()
        doomed = await stack.fork(root.id, "doomed")
        below = await stack.fork(doomed.id, "below")
        other = await stack.root(label="other")
        elsewhere = await stack.fork(doomed.id, "elsewhere", topology_parent_id=other.id)
        reply = await stack.gw.DeleteSession(
            ids_request(stack, agent_pb2.DeleteSessionRequest, doomed.id)
        )
        assert reply.deleted_ids[0] == doomed.id
        assert set(reply.deleted_ids) == {doomed.id, below.id}
        assert reply.deleted_count == 2
        view = await stack.view(elsewhere.id)
        assert not view.node.HasField("source_session_id")
        error = await rpc_error(
            stack.gw.DeleteSession(ids_request(stack, agent_pb2.DeleteSessionRequest, doomed.id))
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_delete_refuses_ids_past_the_callers_limit(self, stack: Stack) -> None:
        """max_reply_bytes goes to the tree: ids past it are refused, nothing deleted."""
        root = await stack.root()
        await stack.fork(root.id, "below")
        request = agent_pb2.DeleteSessionRequest(
            space_id=stack.space.sid, session_id=root.id, max_reply_bytes=60
        )
        error = await rpc_error(stack.gw.DeleteSession(request))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "2 sessions" in (error.details() or "") and "count_only" in (error.details() or "")
        assert (await stack.view(root.id)).node.id == root.id
        request.max_reply_bytes = -5
        error = await rpc_error(stack.gw.DeleteSession(request))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "max_reply_bytes" in (error.details() or "")
        request.max_reply_bytes = 200
        assert (await stack.gw.DeleteSession(request)).deleted_count == 2

    async def test_delete_keeps_the_gateways_own_limit(
        self, small_gateway: RunningServer, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """A gateway whose STELLO_MAX_MESSAGE_BYTES is below the tree's passes its own limit:
        ids it could not receive are refused by the tree before anything is deleted."""
        ids = await seed_topology(pool, space.id, fanout_tree(120, 10))  # 4,576 bytes of ids
        async with small_gateway.channel(space.key) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            request = agent_pb2.DeleteSessionRequest(space_id=space.sid, session_id=str(ids[0]))
            error = await rpc_error(stub.DeleteSession(request))
            assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "120 sessions" in (error.details() or "")
            assert await visible_count(pool, space.id) == 120
            request.count_only = True
            assert (await stub.DeleteSession(request)).deleted_count == 120

    async def test_a_reply_past_the_gateways_limit_is_said_plainly(
        self, small_gateway: RunningServer, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """A tree's reply larger than the gateway's STELLO_MAX_MESSAGE_BYTES fails in words
        that name the limit and what to do, not gRPC's text about its own client."""
        ids = await seed_topology(pool, space.id, fanout_tree(120, 10))
        async with small_gateway.channel(space.key) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            request = agent_pb2.GetTreeRequest(space_id=space.sid, root_id=str(ids[0]))
            error = await rpc_error(stub.GetTree(request))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        details = error.details() or ""
        assert "SessionTree.GetTree" in details and "STELLO_MAX_MESSAGE_BYTES" in details, details
        assert "Received message" not in details and "CLIENT" not in details, details

    async def test_delete_count_only(self, stack: Stack) -> None:
        """With count_only the answer is the count alone, and the subtree is gone."""
        root = await stack.root()
        doomed = await stack.fork(root.id, "doomed")
        await stack.fork(doomed.id, "below")
        request = agent_pb2.DeleteSessionRequest(
            space_id=stack.space.sid, session_id=doomed.id, count_only=True
        )
        reply = await stack.gw.DeleteSession(request)
        assert (list(reply.deleted_ids), reply.deleted_count) == ([], 2)
        error = await rpc_error(
            stack.gw.Archive(ids_request(stack, agent_pb2.ArchiveRequest, doomed.id))
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND


class TestProfiles:
    """ListProfiles."""

    async def test_list_profiles(self, stack: Stack) -> None:
        """Profiles come in file order with modes, contexts, variables and skills presence."""
        reply = await stack.gw.ListProfiles(agent_pb2.ListProfilesRequest(space_id=stack.space.sid))
        names = [p.name for p in reply.profiles]
        assert names == ["research", "preset", "append", "compressor", "bare"]
        research, preset, append, compressor, bare = reply.profiles
        assert research.system_prompt == "You research {topic} in {region}."
        assert list(research.variables) == ["topic", "region"]
        assert research.system_prompt_mode == agent_pb2.SYSTEM_PROMPT_MODE_PREPEND
        assert research.context == common_pb2.FORK_CONTEXT_INHERIT
        assert (research.prompt, list(research.skills.names)) == ("Research started.", ["search"])
        assert preset.system_prompt_mode == agent_pb2.SYSTEM_PROMPT_MODE_PRESET
        assert append.HasField("skills") and list(append.skills.names) == []
        assert compressor.context == common_pb2.FORK_CONTEXT_COMPRESS
        assert bare.system_prompt_mode == agent_pb2.SYSTEM_PROMPT_MODE_PREPEND
        assert bare.context == common_pb2.FORK_CONTEXT_UNSPECIFIED
        assert not bare.HasField("skills") and not bare.HasField("system_prompt")
