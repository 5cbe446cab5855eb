"""The three services on a database of their own, and one pass over every RPC they serve.

`recorded_services` starts storage, tree and gateway (echo model, small window
so compression and consolidation run) against a fresh migrated database;
`drive_every_rpc` then makes each call a client or the gateway makes, on the
success paths and the common refusals, so the statements PostgreSQL records
for that database are the ones the services run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import asyncpg
import grpc
from google.protobuf import timestamp_pb2

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.serving.runner import AppFactory
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service.app import create_app as storage_app
from storage_service.search.backfill import SearchBackfill
from tree_service.app import create_app as tree_app
from tree_service.app import create_sweeper
from tree_service.config import TreeSettings
from tree_service.sweep.sweeper import Sweeper

ROLE = common_pb2.RecordRole
FORK = common_pb2.ForkContext
STATUS = common_pb2.SessionStatus
NOT_FOUND = grpc.StatusCode.NOT_FOUND
HELD = grpc.StatusCode.ABORTED  # a second BeginTurn while the lease is held
STALE = grpc.StatusCode.ABORTED  # a Transact whose precondition no longer holds


@dataclass(slots=True)
class Services:
    """The running apps, stubs authenticated as one space, and an admin key."""

    apps: dict[str, ServiceApp]
    pool: asyncpg.Pool
    space_id: str
    other_space_id: str
    gw: Any
    storage: Any
    tree: Any
    admin_tree: Any
    admin_storage: Any
    sweeper: Sweeper
    keys: KeyStore
    stub: Callable[[str, str, Any], Any]
    """A stub of a service ("storage", "tree", "gateway") for a key: stub(name, secret, kind)."""


@asynccontextmanager
async def recorded_services(dsn: str) -> AsyncIterator[Services]:
    """Storage, tree and gateway on `dsn`, with two spaces; all stopped at exit."""
    settings = StelloSettings(database_url=dsn, auth_cache_ttl_s=0, shutdown_grace_s=1)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, cache_ttl_s=0)
        space = await keys.create_key(space="recorded", principal="recorded")
        other = await keys.create_key(space="elsewhere", principal="recorded")
        admin = await keys.create_key(space=None, scope="admin", principal="recorded-admin")
        assert space.space_id is not None and other.space_id is not None
        running: list[tuple[ServiceApp, grpc.aio.Server]] = []
        channels: list[grpc.aio.Channel] = []
        try:
            ports = {}
            tree_config = TreeSettings(sweep_interval_s=3600)
            factories: dict[str, AppFactory] = {
                "storage": storage_app,
                "tree": partial(tree_app, config=tree_config),
            }
            for name, factory in factories.items():
                app = factory(settings, pool, keys)
                server, ports[name] = await create_server(app, "127.0.0.1:0")
                await server.start()
                running.append((app, server))
            config = GatewaySettings(
                storage_address=f"127.0.0.1:{ports['storage']}",
                tree_address=f"127.0.0.1:{ports['tree']}",
                echo_max_context_tokens=1_500,
                consolidate_every_n_turns=2,
            )
            app = gateway_app(settings, pool, keys, config)
            server, ports["gateway"] = await create_server(app, "127.0.0.1:0")
            await server.start()
            running.append((app, server))

            def stub(name: str, key: str, kind: Any) -> Any:
                channel = open_channel(f"127.0.0.1:{ports[name]}", key=key)
                channels.append(channel)
                return kind(channel)

            yield Services(
                apps={a.name: a for a, _ in running},
                pool=pool,
                space_id=str(space.space_id),
                other_space_id=str(other.space_id),
                gw=stub("gateway", space.secret, agent_pb2_grpc.AgentGatewayStub),
                storage=stub("storage", space.secret, storage_pb2_grpc.SessionStorageStub),
                tree=stub("tree", space.secret, tree_pb2_grpc.SessionTreeStub),
                admin_tree=stub("tree", admin.secret, tree_pb2_grpc.SessionTreeStub),
                admin_storage=stub("storage", admin.secret, storage_pb2_grpc.SessionStorageStub),
                sweeper=create_sweeper(pool, tree_config),
                keys=keys,
                stub=stub,
            )
        finally:
            for channel in channels:
                await channel.close()
            for app, server in reversed(running):
                await shutdown(app, server, 0)


SERVICES = {
    "storage": storage_pb2.DESCRIPTOR.services_by_name["SessionStorage"],
    "tree": tree_pb2.DESCRIPTOR.services_by_name["SessionTree"],
    "agent_gateway": agent_pb2.DESCRIPTOR.services_by_name["AgentGateway"],
}


def not_called(s: Services) -> list[str]:
    """The RPCs of the three services that no call reached (their servers' metrics)."""
    missing: list[str] = []
    for app_name, descriptor in SERVICES.items():
        metrics = s.apps[app_name].metrics
        assert metrics is not None
        called = {
            sample.labels["method"].rpartition("/")[2]
            for family in metrics.registry.collect()
            for sample in family.samples
            if sample.name == "stello_rpc_calls_total"
        }
        missing += sorted(
            f"{descriptor.name}.{m.name}" for m in descriptor.methods if m.name not in called
        )
    return missing


async def attempt(call: Awaitable[Any], *codes: grpc.StatusCode) -> Any:
    """Await a call whose refusal is part of the pass (its statements ran all the same): it
    answers one of `codes`, or the pass fails (an INTERNAL is a statement that failed)."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        assert error.code() in codes, f"{error.code()}: {error.details()}"
        return None


def user(content: str) -> common_pb2.Record:
    """A user record."""
    return common_pb2.Record(role=ROLE.RECORD_ROLE_USER, content=content)


async def drive_every_rpc(s: Services) -> None:
    """Call every RPC of the three services at least once, as clients and the gateway would."""
    await drive_gateway(s)
    await _drive_storage(s)
    await _drive_tree(s)


async def drive_gateway(s: Services) -> None:
    """The gateway's flows in `s.space_id`: turns, tools, forks, reads, import, shared
    memory, watch, delete."""
    sid = s.space_id
    gw = s.gw
    root = (
        await gw.CreateRoot(
            agent_pb2.CreateRootRequest(
                space_id=sid, label="root", system_prompt="Be brief.", request_id="root-1"
            )
        )
    ).session
    await gw.CreateRoot(
        agent_pb2.CreateRootRequest(
            space_id=sid, label="root", system_prompt="Be brief.", request_id="root-1"
        )
    )
    for n in range(6):
        await gw.Send(
            agent_pb2.SendRequest(
                space_id=sid, session_id=root.id, content=f"turn {n} " + "words " * 40
            )
        )
    await gw.Send(
        agent_pb2.SendRequest(space_id=sid, session_id=root.id, content="again", request_id="s-1")
    )
    await gw.Send(
        agent_pb2.SendRequest(space_id=sid, session_id=root.id, content="again", request_id="s-1")
    )
    async for _ in gw.SendStream(
        agent_pb2.SendStreamRequest(space_id=sid, session_id=root.id, content="stream")
    ):
        pass
    lookup = common_pb2.ToolDefinition(name="lookup", description="Look up.")
    sent = await gw.Send(
        agent_pb2.SendRequest(
            space_id=sid, session_id=root.id, content='/tool lookup {"q": 1}', tools=[lookup]
        )
    )
    await gw.SubmitToolResults(
        agent_pb2.SubmitToolResultsRequest(
            space_id=sid,
            session_id=root.id,
            results=[
                agent_pb2.ToolResult(tool_call_id=c.id, content="found")
                for c in sent.pending_tool_calls
            ],
            tools=[lookup],
            request_id="submit-1",
        )
    )
    sent = await gw.Send(
        agent_pb2.SendRequest(
            space_id=sid, session_id=root.id, content='/tool lookup {"q": 2}', tools=[lookup]
        )
    )
    async for _ in gw.SubmitToolResultsStream(
        agent_pb2.SubmitToolResultsStreamRequest(
            space_id=sid,
            session_id=root.id,
            results=[
                agent_pb2.ToolResult(tool_call_id=c.id, content="found")
                for c in sent.pending_tool_calls
            ],
            request_id="submit-stream-1",
        )
    ):
        pass
    await gw.Send(
        agent_pb2.SendRequest(
            space_id=sid,
            session_id=root.id,
            content='/tool stello_create_session {"label": "by tool"}',
        )
    )
    await gw.Consolidate(agent_pb2.ConsolidateRequest(space_id=sid, session_id=root.id))
    forks = []
    for context in (FORK.FORK_CONTEXT_NONE, FORK.FORK_CONTEXT_INHERIT, FORK.FORK_CONTEXT_COMPRESS):
        reply = await gw.Fork(
            agent_pb2.ForkRequest(
                space_id=sid,
                source_session_id=root.id,
                label=f"fork {context}",
                context=context,
                prompt="Go on.",
                request_id=f"fork-{context}",
            )
        )
        forks.append(reply.session)
    await gw.Fork(
        agent_pb2.ForkRequest(
            space_id=sid,
            source_session_id=root.id,
            label="cut",
            context=FORK.FORK_CONTEXT_INHERIT,
            inherit_until_seq=2,
            topology_parent_id=forks[0].id,
        )
    )
    await gw.ListSessionDigests(agent_pb2.ListSessionDigestsRequest(space_id=sid, page_size=2))
    await gw.UpdateSessionMetadata(
        agent_pb2.UpdateSessionMetadataRequest(
            space_id=sid, session_id=root.id, set={"user": "u1"}, remove=["gone"]
        )
    )
    await gw.ListSessionDigests(
        agent_pb2.ListSessionDigestsRequest(
            space_id=sid, filter=common_pb2.SessionFilter(metadata={"user": "u1"})
        )
    )
    await gw.GetSession(agent_pb2.GetSessionRequest(space_id=sid, session_id=root.id))
    await gw.GetLineage(agent_pb2.GetLineageRequest(space_id=sid, session_id=forks[0].id))
    await gw.GetTree(agent_pb2.GetTreeRequest(space_id=sid))
    await gw.ListRecords(
        agent_pb2.ListRecordsRequest(space_id=sid, session_id=root.id, limit=3, newest_first=True)
    )
    await gw.PutInsight(
        agent_pb2.PutInsightRequest(space_id=sid, session_id=forks[1].id, content="hint")
    )
    await gw.SearchRecords(
        agent_pb2.SearchRecordsRequest(space_id=sid, query="hello", root_id=root.id)
    )
    await gw.SearchSessions(agent_pb2.SearchSessionsRequest(space_id=sid, query="cut"))
    await gw.PutMemory(
        agent_pb2.PutMemoryRequest(space_id=sid, session_id=forks[1].id, content="memo")
    )
    await gw.Send(agent_pb2.SendRequest(space_id=sid, session_id=forks[1].id, content="hello"))
    await gw.Archive(agent_pb2.ArchiveRequest(space_id=sid, session_id=forks[2].id))
    await gw.Unarchive(agent_pb2.UnarchiveRequest(space_id=sid, session_id=forks[2].id))
    await gw.ListProfiles(agent_pb2.ListProfilesRequest(space_id=sid))
    await gw.ListSkills(agent_pb2.ListSkillsRequest(space_id=sid, session_id=root.id))
    await _drive_cli_rpcs(gw, sid, root.id, forks[1].id)
    await _drive_shared_memory(gw, agent_pb2, sid, "gw-")
    await _drive_retention(gw, sid, root.id)
    await gw.Send(  # BeginTurn reads the index too
        agent_pb2.SendRequest(space_id=sid, session_id=root.id, content="i", memory_tools=True)
    )
    watch = gw.WatchSpace(agent_pb2.WatchSpaceRequest(space_id=sid, after_cursor="0"))
    await watch.read()
    watch.cancel()
    await gw.DeleteSession(agent_pb2.DeleteSessionRequest(space_id=sid, session_id=forks[0].id))
    await attempt(
        gw.GetSession(agent_pb2.GetSessionRequest(space_id=sid, session_id=forks[0].id)),
        NOT_FOUND,
    )
    await attempt(
        gw.GetSession(agent_pb2.GetSessionRequest(space_id=s.other_space_id, session_id=root.id)),
        NOT_FOUND,  # another space: as if it did not exist
    )


async def _drive_search_backfill(s: Services) -> None:
    """The storage app's search backfill (migration 0035) over the space, marked as one
    written before 0035: its look for work across spaces, then its batches."""
    await s.pool.execute(
        "INSERT INTO search_backfill (space_id) VALUES ($1)", uuid.UUID(s.space_id)
    )
    backfill = next(t for t in s.apps["storage"].background if isinstance(t, SearchBackfill))
    assert await backfill.run_once() is not None


async def _drive_tree_metadata(tr: Any, sid: str, root_id: str, kid_id: str) -> None:
    """Metadata's statements: written at creation (and copied from a source), changed,
    read with the node, and every filter of ListAll (each its own statement)."""
    tagged = (
        await tr.CreateSession(
            tree_pb2.CreateSessionRequest(
                space_id=sid,
                parent_id=root_id,
                source_session_id=kid_id,
                metadata={"user": "u1", "team": "t1"},
            )
        )
    ).node
    await tr.CreateSession(
        tree_pb2.CreateSessionRequest(
            space_id=sid, source_session_id=tagged.id, copy_source_metadata=True
        )
    )
    await tr.UpdateSessionMetadata(
        tree_pb2.UpdateSessionMetadataRequest(
            space_id=sid, session_id=tagged.id, set={"team": "t2"}, remove=["user"]
        )
    )
    await tr.GetNode(
        tree_pb2.GetNodeRequest(space_id=sid, session_id=tagged.id, include_config=True)
    )
    stamp = timestamp_pb2.Timestamp(seconds=1)
    filters = [
        common_pb2.SessionFilter(metadata={"team": "t2"}),
        common_pb2.SessionFilter(metadata={"team": "t2", "user": "u1"}, label_prefix="S"),
        common_pb2.SessionFilter(parent_id=root_id, created_after=stamp),
        common_pb2.SessionFilter(root_id=root_id, updated_after=stamp, updated_before=stamp),
        common_pb2.SessionFilter(roots_only=True, created_before=stamp),
    ]
    for session_filter in filters:
        page = await tr.ListAll(
            tree_pb2.ListAllRequest(
                space_id=sid,
                page_size=1,
                filter=session_filter,
                status=common_pb2.SESSION_STATUS_ACTIVE,
            )
        )
        await tr.ListAll(  # the next page: the same listing (a token is bound to it)
            tree_pb2.ListAllRequest(
                space_id=sid,
                page_size=1,
                filter=session_filter,
                status=common_pb2.SESSION_STATUS_ACTIVE,
                page_token=page.next_page_token,
            )
        )


async def _drive_retention(gw: Any, sid: str, root_id: str) -> None:
    """Retention's statements: the policy, a dry run, a pin, a sweep that archives nothing
    (every session is fresh) and one refused for want of a policy."""
    await attempt(
        gw.ApplyRetention(agent_pb2.ApplyRetentionRequest(space_id=sid, dry_run=True)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    policy = common_pb2.RetentionPolicy(archive_after_days=30, delete_after_days=90)
    await gw.PutRetention(agent_pb2.PutRetentionRequest(space_id=sid, policy=policy))
    await gw.GetRetention(agent_pb2.GetRetentionRequest(space_id=sid))
    await gw.PinSession(agent_pb2.PinSessionRequest(space_id=sid, session_id=root_id, pinned=True))
    await gw.ApplyRetention(agent_pb2.ApplyRetentionRequest(space_id=sid, dry_run=True))
    await gw.ApplyRetention(agent_pb2.ApplyRetentionRequest(space_id=sid))
    await gw.PinSession(agent_pb2.PinSessionRequest(space_id=sid, session_id=root_id, pinned=False))


async def _drive_cli_rpcs(gw: Any, sid: str, root_id: str, inheriting_id: str) -> None:
    """The RPCs the command line leans on: rename, id prefixes, the key's spaces, import."""
    await gw.UpdateLabel(agent_pb2.UpdateLabelRequest(space_id=sid, session_id=root_id, label="r"))
    await gw.ResolveSessionPrefix(
        agent_pb2.ResolveSessionPrefixRequest(space_id=sid, prefix=root_id[:4], limit=2)
    )
    await gw.WhoAmI(agent_pb2.WhoAmIRequest())
    await gw.ImportSession(
        agent_pb2.ImportSessionRequest(
            space_id=sid,
            parent_id=root_id,
            source_session_id=inheriting_id,
            inherit_until_seq=2,
            label="imported",
            memory="m",
            insight="i",
            system_prompt="p",
            records=[user("own")],
            turn_count=1,
            request_id="import-1",
        )
    )


async def _drive_storage(s: Services) -> None:
    sid, st = s.space_id, s.storage
    node = (await s.tree.CreateSession(tree_pb2.CreateSessionRequest(space_id=sid))).node
    session = node.id
    req = {"space_id": sid, "session_id": session}
    await st.AppendRecords(
        storage_pb2.AppendRecordsRequest(
            **req, records=[user("a"), user("b"), user("c")], request_id="append-1"
        )
    )
    meta = (await st.GetSession(storage_pb2.GetSessionRequest(**req))).session
    meta.label = "renamed"
    await st.PutSession(storage_pb2.PutSessionRequest(space_id=sid, session=meta))
    active = STATUS.SESSION_STATUS_ACTIVE
    listed = await st.ListSessions(
        storage_pb2.ListSessionsRequest(space_id=sid, page_size=1, status=active)
    )
    await st.ListSessions(
        storage_pb2.ListSessionsRequest(
            space_id=sid, page_size=1, page_token=listed.next_page_token, status=active
        )
    )
    for query in (
        storage_pb2.ListRecordsRequest(**req, limit=2),
        storage_pb2.ListRecordsRequest(**req, newest_first=True, limit=2),
        storage_pb2.ListRecordsRequest(
            **req, after_seq=1, before_seq=3, role=ROLE.RECORD_ROLE_USER, offset=1
        ),
    ):
        await st.ListRecords(query)
    for order in (common_pb2.SEARCH_ORDER_NEWEST, common_pb2.SEARCH_ORDER_RELEVANCE):
        for scope in ({}, {"session_id": session}, {"root_id": session}):
            first = await st.SearchRecords(
                storage_pb2.SearchRecordsRequest(
                    space_id=sid, query="a or b 你好 c*", order=order, page_size=1, **scope
                )
            )
            await st.SearchRecords(
                storage_pb2.SearchRecordsRequest(
                    space_id=sid,
                    query="a or b 你好 c*",
                    order=order,
                    page_size=1,
                    page_token=first.next_page_token,
                    **scope,
                )
            )
    found = await st.SearchSessions(
        storage_pb2.SearchSessionsRequest(space_id=sid, query="ren", page_size=1, status=active)
    )
    await st.SearchSessions(
        storage_pb2.SearchSessionsRequest(
            space_id=sid, query="ren", page_size=1, page_token=found.next_page_token
        )
    )
    for slot in ("SystemPrompt", "Insight", "Memory"):
        put = getattr(storage_pb2, f"Put{slot}Request")(**req, content=f"{slot} text")
        await getattr(st, f"Put{slot}")(put)
        await getattr(st, f"Get{slot}")(getattr(storage_pb2, f"Get{slot}Request")(**req))
    await st.ConsumeInsight(storage_pb2.ConsumeInsightRequest(**req))
    await st.ClearInsight(storage_pb2.ClearInsightRequest(**req))
    cache = storage_pb2.CompressionCache(summary="so far", covered_until_seq=2)
    await st.PutCompressionCache(storage_pb2.PutCompressionCacheRequest(**req, cache=cache))
    await st.GetCompressionCache(storage_pb2.GetCompressionCacheRequest(**req))
    await st.BatchGetSlots(storage_pb2.BatchGetSlotsRequest(space_id=sid, session_ids=[session]))
    await st.BatchGetSlots(
        storage_pb2.BatchGetSlotsRequest(
            space_id=sid, session_ids=[session], slots=[storage_pb2.SLOT_KIND_MEMORY]
        )
    )
    token = (await st.BeginTurn(storage_pb2.BeginTurnRequest(**req, ttl_s=30))).token
    await attempt(st.BeginTurn(storage_pb2.BeginTurnRequest(**req, ttl_s=30)), HELD)
    await st.RenewTurn(storage_pb2.RenewTurnRequest(**req, token=token, ttl_s=30))
    await _transact(s, session, token)
    await st.ReleaseTurn(storage_pb2.ReleaseTurnRequest(**req, token=token))
    window = storage_pb2.TurnWindow(window_tokens=1)
    turn = await st.BeginTurn(
        storage_pb2.BeginTurnRequest(
            **req, ttl_s=30, window=window, scope="recorded", request_id="r-turn"
        )
    )
    await _drive_turn_line(st, req, window, turn.token)
    await st.GetRememberedResult(
        storage_pb2.GetRememberedResultRequest(space_id=sid, scope="recorded", request_id="r-1")
    )
    await st.TrimRecords(storage_pb2.TrimRecordsRequest(**req, keep_recent=2))
    await st.ReadEvents(storage_pb2.ReadEventsRequest(space_id=sid, after_position=0, limit=5))
    await _drive_shared_memory(st, storage_pb2, sid, "st-")
    claim = await st.ClaimFork(storage_pb2.ClaimForkRequest(**req, min_turns=0, cooldown_turns=2))
    await st.ClaimFork(storage_pb2.ClaimForkRequest(**req, min_turns=0, cooldown_turns=2))
    await st.ReleaseForkClaim(
        storage_pb2.ReleaseForkClaimRequest(**req, claimed_turn=claim.turn_count)
    )
    await attempt(
        st.GetSession(storage_pb2.GetSessionRequest(space_id=sid, session_id=str(uuid.uuid4()))),
        NOT_FOUND,
    )
    await _drive_jobs(s, session)


async def _drive_turn_line(
    st: Any, req: dict[str, Any], window: storage_pb2.TurnWindow, token: str
) -> None:
    """The busy policies' statements: a ticket queued, renewed, left; a lease taken over."""
    enqueue: dict[str, Any] = {"busy": common_pb2.BUSY_POLICY_ENQUEUE, "max_waiters": 4}
    waiter, other = str(uuid.uuid4()), str(uuid.uuid4())
    for who in (waiter, other, waiter):
        await st.BeginTurn(
            storage_pb2.BeginTurnRequest(**req, ttl_s=30, window=window, waiter=who, **enqueue)
        )
    await st.LeaveTurnQueue(storage_pb2.LeaveTurnQueueRequest(**req, waiter=other))
    taken = await st.BeginTurn(
        storage_pb2.BeginTurnRequest(
            **req, ttl_s=30, window=window, busy=common_pb2.BUSY_POLICY_INTERRUPT
        )
    )
    await st.RenewTurn(storage_pb2.RenewTurnRequest(**req, token=token, ttl_s=30))
    await st.ReleaseTurn(storage_pb2.ReleaseTurnRequest(**req, token=taken.token))
    started = await st.BeginTurn(
        storage_pb2.BeginTurnRequest(**req, ttl_s=30, window=window, waiter=waiter, **enqueue)
    )
    await st.ReleaseTurn(storage_pb2.ReleaseTurnRequest(**req, token=started.token))


async def _drive_jobs(s: Services, session: str) -> None:
    """A background job's claim, renewal, checked saves (memory compare-and-set, a summary
    kept beside newer ones), release, and the progress read."""
    op, check = storage_pb2.Operation, storage_pb2.Precondition
    req: dict[str, Any] = {"space_id": s.space_id, "session_id": session}
    kind = common_pb2.JOB_KIND_CONSOLIDATE
    claim = await s.storage.ClaimJob(storage_pb2.ClaimJobRequest(**req, kind=kind, ttl_s=30))
    await s.storage.ClaimJob(storage_pb2.ClaimJobRequest(**req, kind=kind, ttl_s=30))
    await s.storage.ClaimJob(  # a retry of the same claim
        storage_pb2.ClaimJobRequest(**req, kind=kind, ttl_s=30, token=claim.token)
    )
    await s.storage.ListOrphanedJobs(storage_pb2.ListOrphanedJobsRequest())
    await s.admin_storage.ListOrphanedJobs(storage_pb2.ListOrphanedJobsRequest(limit=10))
    await s.storage.RenewJob(
        storage_pb2.RenewJobRequest(**req, kind=kind, token=claim.token, ttl_s=30)
    )
    version = (await s.storage.GetMemory(storage_pb2.GetMemoryRequest(**req))).version
    job = {"session_id": session, "kind": kind, "token": claim.token}
    cache = storage_pb2.CompressionCache(summary="part", covered_until_seq=1)
    await s.storage.Transact(
        storage_pb2.TransactRequest(
            space_id=s.space_id,
            preconditions=[
                check(background_job=check.BackgroundJobCheck(**job)),
                check(
                    memory_version=check.MemoryVersionCheck(session_id=session, expected=version)
                ),
            ],
            operations=[
                op(put_memory=op.PutMemoryOp(session_id=session, content="m", covered_until_seq=2)),
                op(
                    put_compression_cache=op.PutCompressionCacheOp(
                        session_id=session, cache=cache, keep_newer=True
                    )
                ),
                op(update_job=op.UpdateJobOp(**job, covered_until_seq=2, model_calls=1)),
                op(
                    update_job=op.UpdateJobOp(
                        **job, covered_until_seq=2, release=True, status=common_pb2.JOB_STATUS_DONE
                    )
                ),
            ],
        )
    )
    await attempt(
        s.storage.PutMemory(storage_pb2.PutMemoryRequest(**req, content="m", covered_until_seq=1)),
        grpc.StatusCode.ABORTED,  # the memory already covers more
    )
    await s.storage.GetSession(storage_pb2.GetSessionRequest(**req, progress=True))


async def _drive_shared_memory(stub: Any, pb: Any, sid: str, ids: str) -> None:
    """The shared memory RPCs of storage or the gateway (`pb` the module of their messages):
    upserts (new, replaced, retried), pages, get, removes. Request ids begin with `ids`:
    the two passes share a space and a scope, and a removal erases its entry's replies (a
    replay of one is NOT_FOUND)."""
    for slug in ("a", "b", "a"):
        await stub.UpsertSharedMemoryEntry(
            pb.UpsertSharedMemoryEntryRequest(
                space_id=sid,
                slug=slug,
                summary=f"about {slug}",
                body="text",
                request_id=ids + slug,
            )
        )
    first = await stub.ListSharedMemory(pb.ListSharedMemoryRequest(space_id=sid, page_size=1))
    await stub.ListSharedMemory(
        pb.ListSharedMemoryRequest(space_id=sid, page_size=1, page_token=first.next_page_token)
    )
    await stub.GetSharedMemoryEntry(pb.GetSharedMemoryEntryRequest(space_id=sid, slug="a"))
    for request_id in (ids + "rm", ""):
        await stub.RemoveSharedMemoryEntry(
            pb.RemoveSharedMemoryEntryRequest(space_id=sid, slug="b", request_id=request_id)
        )


async def _transact(s: Services, session: str, token: str) -> None:
    """Every Transact operation and precondition, committed, then one refused precondition."""
    op, check = storage_pb2.Operation, storage_pb2.Precondition
    meta = (
        await s.storage.GetSession(
            storage_pb2.GetSessionRequest(space_id=s.space_id, session_id=session)
        )
    ).session
    operations = [
        op(append_records=op.AppendRecordsOp(session_id=session, records=[user("t")])),
        op(put_session=op.PutSessionOp(session=meta)),
        op(put_system_prompt=op.PutSystemPromptOp(session_id=session, content="p")),
        op(put_insight=op.PutInsightOp(session_id=session, content="i")),
        op(clear_insight=op.ClearInsightOp(session_id=session)),
        op(put_memory=op.PutMemoryOp(session_id=session, content="m")),
        op(
            put_compression_cache=op.PutCompressionCacheOp(
                session_id=session,
                cache=storage_pb2.CompressionCache(summary="s", covered_until_seq=1),
            )
        ),
        op(trim_records=op.TrimRecordsOp(session_id=session, keep_recent=3)),
        op(bump_turn=op.BumpTurnOp(session_id=session)),
        op(
            remember_result=op.RememberResultOp(
                scope="recorded", request_id="r-1", request_hash=b"h", response=b"r"
            )
        ),
        op(release_turn=op.ReleaseTurnOp(session_id=session, token=token)),
    ]
    preconditions = [
        check(session_last_seq=check.SessionLastSeqCheck(session_id=session, expected=3)),
        check(insight_unchanged=check.InsightUnchangedCheck(session_id=session)),
        check(turn_lease=check.TurnLeaseCheck(session_id=session, token=token)),
    ]
    await s.storage.Transact(
        storage_pb2.TransactRequest(
            space_id=s.space_id,
            preconditions=preconditions,
            operations=operations,
            request_id="tx-1",
        )
    )
    await attempt(
        s.storage.Transact(
            storage_pb2.TransactRequest(
                space_id=s.space_id, preconditions=preconditions, operations=operations[:1]
            )
        ),
        STALE,
    )


async def _drive_tree(s: Services) -> None:
    sid, tr = s.space_id, s.tree
    root = (
        await tr.CreateSession(
            tree_pb2.CreateSessionRequest(
                space_id=sid,
                label="t",
                config=common_pb2.SessionConfig(system_prompt="x"),
                request_id="create-1",
            )
        )
    ).node
    kids = [
        (
            await tr.CreateSession(tree_pb2.CreateSessionRequest(space_id=sid, parent_id=root.id))
        ).node
        for _ in range(2)
    ]
    hidden = (
        await tr.CreateSession(
            tree_pb2.CreateSessionRequest(
                space_id=sid, parent_id=kids[0].id, source_session_id=kids[1].id, provisional=True
            )
        )
    ).node
    await tr.CommitSession(tree_pb2.CommitSessionRequest(space_id=sid, session_id=hidden.id))
    await tr.CreateSession(
        tree_pb2.CreateSessionRequest(space_id=sid, parent_id=root.id, provisional=True)
    )
    one = {"space_id": sid, "session_id": kids[0].id}
    await tr.GetNode(tree_pb2.GetNodeRequest(**one))
    await tr.ListRoots(tree_pb2.ListRootsRequest(space_id=sid))
    page = await tr.ListAll(tree_pb2.ListAllRequest(space_id=sid, page_size=2))
    await tr.ListAll(
        tree_pb2.ListAllRequest(space_id=sid, page_size=2, page_token=page.next_page_token)
    )
    await tr.GetChildren(tree_pb2.GetChildrenRequest(space_id=sid, session_id=root.id))
    await tr.GetSiblings(tree_pb2.GetSiblingsRequest(**one))
    await tr.GetAncestors(tree_pb2.GetAncestorsRequest(space_id=sid, session_id=hidden.id))
    first = await tr.ListAncestors(
        tree_pb2.ListAncestorsRequest(space_id=sid, session_id=hidden.id, page_size=1)
    )
    await tr.ListAncestors(
        tree_pb2.ListAncestorsRequest(
            space_id=sid, session_id=hidden.id, page_size=1, page_token=first.next_page_token
        )
    )
    await tr.GetTree(tree_pb2.GetTreeRequest(space_id=sid, root_id=root.id, max_depth=1))
    await tr.AddRef(tree_pb2.AddRefRequest(space_id=sid, from_id=kids[0].id, to_id=kids[1].id))
    await attempt(
        tr.AddRef(tree_pb2.AddRefRequest(space_id=sid, from_id=hidden.id, to_id=root.id)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    await tr.RemoveRef(
        tree_pb2.RemoveRefRequest(space_id=sid, from_id=kids[0].id, to_id=kids[1].id)
    )
    await tr.Archive(tree_pb2.ArchiveRequest(**one))
    await tr.Unarchive(tree_pb2.UnarchiveRequest(**one))
    await tr.UpdateLabel(tree_pb2.UpdateLabelRequest(**one, label="relabelled"))
    await tr.PutConfig(
        tree_pb2.PutConfigRequest(**one, config=common_pb2.SessionConfig(system_prompt="y"))
    )
    await tr.GetConfig(tree_pb2.GetConfigRequest(**one))
    await _drive_tree_metadata(tr, sid, root.id, kids[0].id)
    await tr.DeleteSubtree(tree_pb2.DeleteSubtreeRequest(space_id=sid, session_id=kids[1].id))
    await s.admin_tree.SweepProvisional(tree_pb2.SweepProvisionalRequest(dry_run=True))
    await s.admin_tree.SweepProvisional(tree_pb2.SweepProvisionalRequest())
    await asyncio.sleep(1.1)  # the provisional session under the root is now a second old
    await s.admin_tree.SweepProvisional(tree_pb2.SweepProvisionalRequest(older_than_s=1))
    await s.sweeper.run_once()  # the periodic sweep, and the purge of expired request_ids
    await _drive_search_backfill(s)
