"""A worker down: the spaces of the other worker keep writing (DESIGN §4.7, docs/scaling.md).

Every request statement is routed to its space's worker ("What co-location
gives"), so a worker that stops takes down only the spaces it holds. On a
cluster of its own (a coordinator and two workers: the test stops one, and the
pass's cluster stays whole), the three services run on a distributed database
with a space on each worker. With one worker stopped, the space on the other
one does every write path end to end: CreateRoot, Send (the append, the turn's
Transact), storage's AppendRecords (the append as its own statement, delegated
to the worker), Fork INHERIT (lineage, prompt copy), the slots, a trim and a
DeleteSession (the release to the heirs), each replayed with its request_id
(the stored reply). The space on the stopped worker answers UNAVAILABLE (never
INTERNAL), and writes again once the worker is back. The maintenance goes on for the
other worker's spaces: a subtree DeleteSubtree hid there is erased by the tree app's
erasure job, whose look across spaces fails, space by space, the stopped worker's spaces
skipped and counted (`stello.db.periodic.Periodic.by_space`). What the nodes logged is
checked as the Citus pass checks its own (`ALLOWED_ERRORS`).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import cast

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2
from stello.db.maintenance import space_ids
from stello.db.migrate import migrate
from stello.db.periodic import Periodic
from stello.distribution.apply import distribute
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.stored import idempotency
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service.events.service import Purger
from storage_service.search.backfill import SearchBackfill
from storage_service.unit import Database
from tests.cli.processes import client_env
from tests.distribution.services import Services, recorded_services, user
from tests.distribution.test_citus_services import SPACE_NODE
from tests.support.citus import (
    CitusCluster,
    CitusNode,
    LoggedError,
    citus_cluster,
    citus_skip_reason,
    logged_errors,
    start_node,
    stop_node,
)
from tests.support.citus_pass import create_distributed_database, unexpected_errors
from tree_service.app import create_retention, create_sweeper
from tree_service.retention.service import RetentionSweeper

pytestmark = [pytest.mark.citus, pytest.mark.timeout(300)]

INHERIT = common_pb2.FORK_CONTEXT_INHERIT
SPACE_TRIES = 64  # each new space lands on either worker: 2**-64 to miss one


@pytest.fixture(name="own_cluster", scope="module")
def _own_cluster() -> Iterator[CitusCluster]:
    """A coordinator and two workers of this module alone (one of them is stopped)."""
    reason = citus_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with citus_cluster() as started:
        yield started


class Tenant:
    """A space's stubs: the gateway's and storage's, with its key."""

    def __init__(self, s: Services, space_id: str, secret: str, key_id: str) -> None:
        self.space_id = space_id
        self.key_id = key_id
        self.gw = s.stub("gateway", secret, agent_pb2_grpc.AgentGatewayStub)
        self.storage = s.stub("storage", secret, storage_pb2_grpc.SessionStorageStub)
        self.tree = s.stub("tree", secret, tree_pb2_grpc.SessionTreeStub)


async def _tenants(s: Services, con: asyncpg.Connection) -> dict[int, Tenant]:
    """A new space on each worker, by the worker's port (keys are written while all are up:
    a key is a row of a reference table, on every node)."""
    found: dict[int, Tenant] = {}
    for n in range(SPACE_TRIES):
        key = await s.keys.create_key(space=f"outage-{n}", principal="outage")
        assert key.space_id is not None
        port = await con.fetchval(SPACE_NODE, key.space_id)
        found.setdefault(port, Tenant(s, str(key.space_id), key.secret, str(key.key_id)))
        if len(found) == 2:
            return found
    raise AssertionError(f"{SPACE_TRIES} new spaces all landed on one worker")


async def _code(call: object) -> grpc.StatusCode:
    """The status code the call answered (OK when it succeeded)."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def _every_write(t: Tenant) -> dict[str, object]:
    """Every write path of the space, each keyed one done twice; what the checks compare."""
    sid, gw, st = t.space_id, t.gw, t.storage
    create = agent_pb2.CreateRootRequest(
        space_id=sid, label="root", system_prompt="Be brief.", request_id="root"
    )
    root = (await gw.CreateRoot(create)).session
    again = (await gw.CreateRoot(create)).session
    send = agent_pb2.SendRequest(space_id=sid, session_id=root.id, content="hi", request_id="s")
    sent = await gw.Send(send)
    resent = await gw.Send(send)
    for n in range(3):
        await gw.Send(agent_pb2.SendRequest(space_id=sid, session_id=root.id, content=f"t{n}"))
    append = storage_pb2.AppendRecordsRequest(
        space_id=sid, session_id=root.id, records=[user("a"), user("b")], request_id="append"
    )
    appended = await st.AppendRecords(append)
    reappended = await st.AppendRecords(append)
    # The forks hang under another root: the source's DeleteSession below leaves them.
    keep = (await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=sid, label="keep"))).session
    fork = agent_pb2.ForkRequest(
        space_id=sid,
        source_session_id=root.id,
        label="kid",
        context=INHERIT,
        request_id="f",
        topology_parent_id=keep.id,
    )
    kid = (await gw.Fork(fork)).session
    kid_again = (await gw.Fork(fork)).session
    await gw.Send(agent_pb2.SendRequest(space_id=sid, session_id=kid.id, content="on"))
    await gw.PutMemory(agent_pb2.PutMemoryRequest(space_id=sid, session_id=kid.id, content="m"))
    await gw.PutInsight(agent_pb2.PutInsightRequest(space_id=sid, session_id=kid.id, content="i"))
    await st.PutSystemPrompt(
        storage_pb2.PutSystemPromptRequest(space_id=sid, session_id=root.id, content="Terse.")
    )
    heir = (
        await gw.Fork(
            agent_pb2.ForkRequest(
                space_id=sid,
                source_session_id=root.id,
                label="heir",
                context=INHERIT,
                topology_parent_id=keep.id,
            )
        )
    ).session
    # The source trimmed, then deleted: its forks' rows go to an heir (the release).
    await st.TrimRecords(
        storage_pb2.TrimRecordsRequest(space_id=sid, session_id=root.id, keep_recent=2)
    )
    await gw.DeleteSession(agent_pb2.DeleteSessionRequest(space_id=sid, session_id=root.id))
    records = await gw.ListRecords(
        agent_pb2.ListRecordsRequest(space_id=sid, session_id=heir.id, limit=100)
    )
    slots = await st.GetSession(
        storage_pb2.GetSessionRequest(
            space_id=sid,
            session_id=kid.id,
            slots=[storage_pb2.SLOT_KIND_MEMORY, storage_pb2.SLOT_KIND_SYSTEM_PROMPT],
        )
    )
    return {
        "root replayed": again.id == root.id,
        "send replayed": resent == sent,
        "append replayed": reappended == appended,
        "fork replayed": kid_again.id == kid.id,
        "heir's records": len(records.records),
        "kid's memory": slots.slots.memory,
        "kid's prompt": slots.slots.system_prompt,
    }


ERASED_WITHIN_S = 30.0
SPACE_SESSIONS = "SELECT count(*) FROM sessions WHERE space_id = $1 AND id = ANY($2::uuid[])"


def _eraser(s: Services) -> Periodic:
    """The tree app's erasure job (a background task of its server)."""
    (eraser,) = (
        t for t in s.apps["tree"].background if getattr(t, "task_name", "") == "stello-tree-eraser"
    )
    assert isinstance(eraser, Periodic)
    return eraser


async def _erasure(s: Services, t: Tenant, dsn: str) -> dict[str, object]:
    """A subtree of the space deleted (hidden) while the other worker is down: whether the
    tree app's erasure job erased it, and how many spaces its rounds skipped so far."""
    sid = t.space_id
    top = (await t.tree.CreateSession(tree_pb2.CreateSessionRequest(space_id=sid))).node
    kid = (
        await t.tree.CreateSession(tree_pb2.CreateSessionRequest(space_id=sid, parent_id=top.id))
    ).node
    await t.tree.DeleteSubtree(tree_pb2.DeleteSubtreeRequest(space_id=sid, session_id=top.id))
    ids = [uuid.UUID(top.id), uuid.UUID(kid.id)]
    con = await asyncpg.connect(dsn)
    try:
        left, ends = -1, time.monotonic() + ERASED_WITHIN_S
        while time.monotonic() < ends:
            left = await con.fetchval(SPACE_SESSIONS, uuid.UUID(sid), ids)
            if left == 0:
                break
            await asyncio.sleep(0.2)
    finally:
        await con.close()
    return {"rows left": left, "skipped spaces": _eraser(s).rounds.skipped_spaces > 0}


async def _rounds_by_space(s: Services) -> dict[str, object]:
    """A round of each other maintenance task, driven here: each one's work across spaces
    fails, so it goes space by space (every statement routed to its space's worker: the
    database refuses any other) and skips the stopped worker's spaces. Per task: whether the
    round ended (no outage) having skipped spaces."""
    db = Database(s.pool)
    retention = RetentionSweeper(create_retention(s.pool), 3600)
    await retention.run_once()  # the first round sweeps nothing (a restart's)
    tasks: list[Periodic] = [
        create_sweeper(s.pool),
        retention,
        Purger(db, 86_400, 3600),
        SearchBackfill(db, 100, 3600),
    ]
    seen: dict[str, object] = {}
    for task in tasks:
        await task.run_once()
        seen[task.task_name] = task.rounds.skipped_spaces > 0
    return seen


async def _expired_key(pool: asyncpg.Pool, tenant: Tenant) -> None:
    """A request key of `tenant`'s space past its 24 h (the sweep's purge deletes it)."""
    space_id = uuid.UUID(tenant.space_id)
    async with pool.acquire() as con, con.transaction():
        await idempotency.remember(
            cast(asyncpg.Connection, con), space_id, "expired", "r", b"h", b"reply"
        )
        await con.execute(
            "UPDATE idempotency_keys SET created_at = now() - interval '25 hours'"
            " WHERE space_id = $1 AND scope = 'expired'",
            space_id,
        )


async def _stopped_job(pool: asyncpg.Pool, tenant: Tenant) -> tuple[str, str]:
    """A root of `tenant`'s space with a job a shutdown stopped (an orphan for the takeover):
    (space, session)."""
    root = (
        await tenant.gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=tenant.space_id))
    ).session
    await pool.execute(
        "INSERT INTO background_jobs (space_id, session_id, kind, status)"
        " VALUES ($1, $2, 'fold', 'stopped')",
        uuid.UUID(tenant.space_id),
        uuid.UUID(root.id),
    )
    return tenant.space_id, root.id


async def _orphans(s: Services) -> list[tuple[str, str]] | str:
    """ListOrphanedJobs with an admin key: the jobs' (space, session), or the status code."""
    try:
        listed = await s.admin_storage.ListOrphanedJobs(
            storage_pb2.ListOrphanedJobsRequest(limit=10)
        )
    except grpc.aio.AioRpcError as exc:
        return str(exc.code())
    return [(j.space_id, j.session_id) for j in listed.jobs]


async def _cli(dsn: str, *args: str) -> tuple[int, str]:
    """`stello ARGS --database-url DSN` in a process of its own: exit code and stderr (without
    asyncio debug mode, whose slow-callback warnings a busy machine adds to stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stello_cli",
        *args,
        "--database-url",
        dsn,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=client_env(dict(os.environ)),
    )
    _, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, err.decode()


BEHIND = "0040_search_vector_bound"
"""The release a second database is migrated to before the outage: the migrations after it
change every node."""


async def _distributed_until(cluster: CitusCluster, until: str) -> str:
    """A fresh database on `cluster` migrated until `until`, distributed; its DSN."""
    dsn = await cluster.create_database()
    con = await asyncpg.connect(dsn)
    try:
        await migrate(con, until=until)
        await distribute(con, shard_count=4)
    finally:
        await con.close()
    return dsn


@pytest.fixture(name="outage", scope="module")
async def _outage(own_cluster: CitusCluster) -> AsyncIterator[dict[str, object]]:
    """The writes with one worker stopped, then the stopped worker's space after its restart."""
    dsn = await create_distributed_database(own_cluster)
    behind = await _distributed_until(own_cluster, BEHIND)
    seen: dict[str, object] = {}
    async with recorded_services(dsn) as services:
        con = await asyncpg.connect(dsn)
        try:
            tenants = await _tenants(services, con)
        finally:
            await con.close()
        ports = {w.port: w for w in own_cluster.workers}
        down_port, up_port = sorted(tenants)
        down: CitusNode = ports[down_port]
        stranded, alive = tenants[down_port], tenants[up_port]
        stranded_root = (
            await stranded.gw.CreateRoot(
                agent_pb2.CreateRootRequest(space_id=stranded.space_id, label="before")
            )
        ).session
        await _expired_key(services.pool, alive)
        orphan = await _stopped_job(services.pool, alive)
        stop_node(down)
        try:
            seen["alive"] = await _every_write(alive)
            seen["alive erasure"] = await _erasure(services, alive, dsn)
            seen["rounds by space"] = await _rounds_by_space(services)
            seen["orphans listed"] = await _orphans(services)
            seen["orphan"] = orphan
            seen["alive expired keys"] = await services.pool.fetchval(
                "SELECT count(*) FROM idempotency_keys WHERE space_id = $1 AND scope = 'expired'",
                uuid.UUID(alive.space_id),
            )
            seen["keys revoke"] = await _cli(dsn, "keys", "revoke", alive.key_id)
            seen["migrate"] = await _cli(behind, "migrate")
            listed = await space_ids(services.pool)
            seen["nodes known"] = (
                all(space.node for space in listed),
                any(str(space.node).endswith(f":{down_port}") for space in listed),
            )
            seen["stopped port"] = down_port
            seen["stranded CreateRoot"] = await _code(
                stranded.gw.CreateRoot(
                    agent_pb2.CreateRootRequest(space_id=stranded.space_id, label="r")
                )
            )
            seen["stranded Send"] = await _code(
                stranded.gw.Send(
                    agent_pb2.SendRequest(
                        space_id=stranded.space_id, session_id=stranded_root.id, content="x"
                    )
                )
            )
            seen["stranded AppendRecords"] = await _code(
                stranded.storage.AppendRecords(
                    storage_pb2.AppendRecordsRequest(
                        space_id=stranded.space_id,
                        session_id=stranded_root.id,
                        records=[user("x")],
                    )
                )
            )
        finally:
            start_node(down)
        seen["stranded after the restart"] = await _every_write(stranded)
    seen["errors"] = [
        (node.name, error.message, error.statement[:200])
        for node in own_cluster.nodes
        for error in unexpected_errors(logged_errors(node.log()))
        if not _closed_by_the_stopped_worker(error, down_port)
    ]
    yield seen


def _closed_by_the_stopped_worker(error: LoggedError, port: int) -> bool:
    """A statement of the stranded space sent on a connection to the stopped worker that Citus
    had cached: the first statement on it fails so, the next ones are refused (ALLOWED_ERRORS).
    A stranded AppendRecords logged it in ci5 of stop 72 (and answered UNAVAILABLE, as
    expected), which failed the pass."""
    closed = (
        rf"^connection to the remote node \S+@127\.0\.0\.1:{port} failed with the following "
        "error: server closed the connection unexpectedly"
    )
    return re.match(closed, error.message) is not None


WRITTEN = {
    "root replayed": True,
    "send replayed": True,
    "append replayed": True,
    "fork replayed": True,
    "heir's records": 10,
    "kid's memory": "m",
    "kid's prompt": "Be brief.",
}


class TestAWorkerDown:
    def test_the_other_workers_space_does_every_write(self, outage: dict[str, object]) -> None:
        """With a worker stopped, a space on the other worker creates, sends, appends, forks,
        puts slots, trims and deletes, and each keyed call replays its stored reply."""
        assert outage["alive"] == WRITTEN, outage

    @pytest.mark.parametrize("call", ["CreateRoot", "Send", "AppendRecords"])
    def test_the_stopped_workers_space_is_unavailable(
        self, outage: dict[str, object], call: str
    ) -> None:
        """A space on the stopped worker answers UNAVAILABLE (a retry may succeed), never
        INTERNAL."""
        assert outage[f"stranded {call}"] == grpc.StatusCode.UNAVAILABLE

    def test_the_stopped_workers_space_writes_once_it_is_back(
        self, outage: dict[str, object]
    ) -> None:
        """Restarted, the worker's space does every write again (the coordinator's broken
        connections to it are replaced)."""
        assert outage["stranded after the restart"] == WRITTEN

    def test_the_other_workers_space_is_still_erased(self, outage: dict[str, object]) -> None:
        """A subtree deleted in a space of the healthy worker is erased (its rows gone)
        though the erasure's look across spaces fails: the job goes space by space and counts
        the stopped worker's spaces it skipped."""
        assert outage["alive erasure"] == {"rows left": 0, "skipped spaces": True}

    def test_every_maintenance_round_goes_on_space_by_space(
        self, outage: dict[str, object]
    ) -> None:
        """The provisional sweep, retention, the event purge and the search backfill each end
        a round (no outage) with the stopped worker's spaces skipped, their statements routed
        to one space each (the pass's database refuses any other)."""
        assert outage["rounds by space"] == {
            "stello-tree-sweeper": True,
            "stello-tree-retention": True,
            "stello-storage-event-purge": True,
            "stello-storage-search-backfill": True,
        }

    def test_the_sweep_by_space_purges_the_expired_request_keys(
        self, outage: dict[str, object]
    ) -> None:
        """The sweep's round space by space purges the other worker's space's expired request
        keys (with the replies they hold): the purge went across spaces only, so a worker down
        kept every space's keys past their 24 h."""
        assert outage["alive expired keys"] == 0

    def test_jobs_left_without_a_gateway_are_listed_space_by_space(
        self, outage: dict[str, object]
    ) -> None:
        """ListOrphanedJobs with an admin key (what every gateway's takeover asks) lists the
        other worker's space's orphaned job: its read across spaces failed whole, so no job
        of any space was taken over while one worker was down."""
        assert outage["orphans listed"] == [outage["orphan"]]

    def test_the_spaces_and_their_nodes_are_listed(self, outage: dict[str, object]) -> None:
        """With a worker stopped, the spaces are listed (a reference table, read on the
        coordinator) with the node of each, the stopped one's included (the round skips a
        node's other spaces once one was out of reach)."""
        assert outage["nodes known"] == (True, True)

    def test_key_management_names_the_node_out_of_reach(self, outage: dict[str, object]) -> None:
        """`stello keys revoke` of a key of the healthy worker's space fails (a reference
        table's write needs every node), and says which node is out of reach and why, not
        that the database is unavailable, in one line: the pool's outage warning (a
        service's log line) printed before it was a second message."""
        answered = outage["keys revoke"]
        assert isinstance(answered, tuple)
        code, err = answered
        assert code == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        last = lines[-1]
        assert f"the database node 127.0.0.1:{outage['stopped port']} is out of reach" in last
        assert "bring the node back" in last, last

    def test_migrate_names_the_node_out_of_reach(self, outage: dict[str, object]) -> None:
        """`stello migrate` on a distributed database with migrations pending fails while a
        worker is stopped (a migration changes every node) and says, in one line, which node
        is out of reach and what to do: it printed the coordinator's error alone, which named
        the node but not that the rest of the upgrade waits for it."""
        answered = outage["migrate"]
        assert isinstance(answered, tuple)
        code, err = answered
        assert code == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert f"the database node 127.0.0.1:{outage['stopped port']} is out of reach" in lines[0]
        assert "bring the node back, then run the same command again" in lines[0], lines[0]

    def test_the_nodes_logged_only_the_outage(self, outage: dict[str, object]) -> None:
        """No node logged an ERROR that ALLOWED_ERRORS does not explain."""
        errors = outage["errors"]
        assert errors == [], errors
