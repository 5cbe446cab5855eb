"""The gateway's RPCs for people at a command line: UpdateLabel, ResolveSessionPrefix, WhoAmI."""

from __future__ import annotations

import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.errors import (
    error_info_metadata,
    error_info_reason,
    field_violations,
    precondition_violations,
)
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.gateway.conftest import Stack, close_stack, new_id, open_stack, rpc_error
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


async def rename(stack: Stack, session_id: str, label: str) -> common_pb2.SessionSummary:
    """UpdateLabel in the stack's space."""
    reply: agent_pb2.UpdateLabelResponse = await stack.gw.UpdateLabel(
        agent_pb2.UpdateLabelRequest(space_id=stack.space.sid, session_id=session_id, label=label)
    )
    return reply.session


async def resolve(stack: Stack, prefix: str, limit: int = 0) -> list[str]:
    """The ids ResolveSessionPrefix answers."""
    reply: agent_pb2.ResolveSessionPrefixResponse = await stack.gw.ResolveSessionPrefix(
        agent_pb2.ResolveSessionPrefixRequest(space_id=stack.space.sid, prefix=prefix, limit=limit)
    )
    return [s.id for s in reply.sessions]


class TestUpdateLabel:
    async def test_rename_shows_everywhere(self, stack: Stack) -> None:
        """The new label is answered and shown by GetSession, the tree and the digests."""
        root = await stack.root(label="old")
        renamed = await rename(stack, root.id, "new")
        assert (renamed.id, renamed.label) == (root.id, "new")
        assert (await stack.view(root.id)).node.label == "new"
        tree = await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid))
        assert [n.label for n in tree.nodes] == ["new"]
        digests = await stack.gw.ListSessionDigests(
            agent_pb2.ListSessionDigestsRequest(space_id=stack.space.sid)
        )
        assert [d.label for d in digests.digests] == ["new"]

    async def test_bad_label_and_ids_are_named(self, stack: Stack) -> None:
        """An empty label and a malformed id are one INVALID_ARGUMENT naming both."""
        error = await rpc_error(
            stack.gw.UpdateLabel(
                agent_pb2.UpdateLabelRequest(space_id=stack.space.sid, session_id="x", label=" ")
            )
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["session_id", "label"]

    async def test_archived_is_refused(self, stack: Stack) -> None:
        """An archived session keeps its label: FAILED_PRECONDITION SESSION_ARCHIVED, its
        subject `session/<id>` as other errors about a session have it."""
        root = await stack.root(label="kept")
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        error = await rpc_error(rename(stack, root.id, "nope"))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "SESSION_ARCHIVED"
        assert error_info_metadata(error) == {"subject": f"session/{root.id}"}
        assert [(v.type, v.subject) for v in precondition_violations(error)] == [
            ("SESSION_ARCHIVED", f"session/{root.id}")
        ]
        assert (await stack.view(root.id)).node.label == "kept"

    async def test_unknown_and_foreign_are_not_found(
        self, stack: Stack, other_space: TestSpace
    ) -> None:
        """Another tenant's session, and one that does not exist, are NOT_FOUND and unchanged."""
        other = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        try:
            theirs = await other.root(label="theirs")
            for session_id in (theirs.id, new_id()):
                error = await rpc_error(rename(stack, session_id, "mine"))
                assert error.code() is grpc.StatusCode.NOT_FOUND
            assert (await other.view(theirs.id)).node.label == "theirs"
        finally:
            await close_stack(other)


class TestResolveSessionPrefix:
    async def test_prefixes_of_the_space(self, stack: Stack, other_space: TestSpace) -> None:
        """A whole id, its first digits, or its upper case find it; another space's do not."""
        root = await stack.root(label="r")
        child = await stack.fork(root.id, "c")
        assert await resolve(stack, root.id) == [root.id]
        assert await resolve(stack, root.id[:8].upper()) == [root.id]
        both = sorted([root.id, child.id])
        found = []
        for digit in "0123456789abcdef":
            found += await resolve(stack, digit)
        assert sorted(found) == both
        other = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        try:
            assert await resolve(other, root.id[:8]) == []
        finally:
            await close_stack(other)

    async def test_limit_tells_ambiguity(self, stack: Stack) -> None:
        """A first digit 17 sessions must share answers two candidates with limit 2, one with 1."""
        ids = [(await stack.root(label=f"r{i}")).id for i in range(17)]
        shared = next(d for d in "0123456789abcdef" if sum(i.startswith(d) for i in ids) >= 2)
        expected = sorted(i for i in ids if i.startswith(shared))
        assert await resolve(stack, shared, limit=2) == expected[:2]
        assert await resolve(stack, shared, limit=1) == expected[:1]

    @pytest.mark.parametrize(
        ("prefix", "limit", "bad"),
        [
            pytest.param("", 0, ["prefix"], id="empty"),
            pytest.param("xyz", 0, ["prefix"], id="not-hex"),
            pytest.param("a", 101, ["limit"], id="limit"),
        ],
    )
    async def test_bad_requests_name_the_field(
        self, stack: Stack, prefix: str, limit: int, bad: list[str]
    ) -> None:
        """A malformed prefix or limit is INVALID_ARGUMENT naming it."""
        error = await rpc_error(resolve(stack, prefix, limit))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == bad


class TestWhoAmI:
    async def test_tenant_key_reaches_its_space(self, stack: Stack) -> None:
        """A tenant key answers its principal, its key id, its scope and its one space."""
        reply = await stack.gw.WhoAmI(agent_pb2.WhoAmIRequest())
        tag = reply.principal.removeprefix("principal-")
        assert reply.principal == f"principal-{tag}"  # tests/support/fixtures.new_space
        assert reply.key_id == str(stack.space.key_id)
        assert reply.scope == agent_pb2.KEY_SCOPE_TENANT
        assert [(s.id, s.name) for s in reply.spaces] == [(stack.space.sid, f"space-{tag}")]

    async def test_admin_key_reaches_its_principals_spaces(
        self, stack: Stack, keys: KeyStore
    ) -> None:
        """An admin key of a principal answers every space of that principal, oldest first."""
        owner = f"acme-{new_id()}"
        first = await keys.create_key(space="team-a", principal=owner)
        second = await keys.create_key(space="team-b", principal=owner)
        admin = await keys.create_key(space=None, scope="admin", principal=owner)
        async with stack.gateway.channel(admin.secret) as channel:
            reply = await agent_pb2_grpc.AgentGatewayStub(channel).WhoAmI(agent_pb2.WhoAmIRequest())
        assert reply.principal == owner
        assert reply.scope == agent_pb2.KEY_SCOPE_ADMIN
        assert [(s.id, s.name) for s in reply.spaces] == [
            (str(first.space_id), "team-a"),
            (str(second.space_id), "team-b"),
        ]

    async def test_no_key_is_unauthenticated(self, stack: Stack) -> None:
        """Without a key WhoAmI is UNAUTHENTICATED, like every RPC."""
        async with stack.gateway.channel() as channel:
            error = await rpc_error(
                agent_pb2_grpc.AgentGatewayStub(channel).WhoAmI(agent_pb2.WhoAmIRequest())
            )
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED


class TestAdminKeysAndMissingSpaces:
    async def test_a_space_that_does_not_exist_is_not_found(
        self, stack: Stack, admin_key: str, keys: KeyStore
    ) -> None:
        """An admin key reaches every space, but only one that exists: a space never made,
        or deleted, is NOT_FOUND naming it on the gateway, storage and the tree, as a
        tenant's key gets for a space not its own. PutRetention answered INTERNAL (a foreign
        key), CreateRoot blamed "the parent or source session", reads answered empty."""
        gone = await keys.create_key(space=f"gone-{new_id()}", principal="test-admin")
        assert gone.space_id is not None
        assert await keys.delete_space(str(gone.space_id)) == gone.space_id
        policy = common_pb2.RetentionPolicy(archive_after_days=3)
        for space in (new_id(), str(gone.space_id)):
            async with (
                stack.gateway.channel(admin_key) as gateway,
                stack.backends.storage.channel(admin_key) as storage,
                stack.backends.tree.channel(admin_key) as tree,
            ):
                gw = agent_pb2_grpc.AgentGatewayStub(gateway)
                calls = [
                    gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space, label="x")),
                    gw.PutRetention(agent_pb2.PutRetentionRequest(space_id=space, policy=policy)),
                    gw.GetTree(agent_pb2.GetTreeRequest(space_id=space)),
                    gw.ListSessionDigests(agent_pb2.ListSessionDigestsRequest(space_id=space)),
                    storage_pb2_grpc.SessionStorageStub(storage).ListSharedMemory(
                        storage_pb2.ListSharedMemoryRequest(space_id=space)
                    ),
                    tree_pb2_grpc.SessionTreeStub(tree).ListRoots(
                        tree_pb2.ListRootsRequest(space_id=space)
                    ),
                ]
                for call in calls:
                    error = await rpc_error(call)
                    assert error.code() is grpc.StatusCode.NOT_FOUND, error
                    assert (error.details() or "").startswith(f"space {space} not found: "), error
        reply = await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid))
        assert list(reply.nodes) == []  # the tenant's own space answers as before
        async with stack.gateway.channel(admin_key) as gateway:
            reply = await agent_pb2_grpc.AgentGatewayStub(gateway).GetTree(
                agent_pb2.GetTreeRequest(space_id=stack.space.sid)
            )
        assert list(reply.nodes) == []  # an admin key still reaches a space that exists
