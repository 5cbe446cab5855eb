"""Per-call overhead: our servers' CPU per call against bare grpc.aio servers, same SQL, same hops.

Measured in one run (DESIGN §9: per hop, server CPU <= 1.3x the bare server's):

- storage AppendRecords of one record (1 hop, one statement: APPEND_RECORDS);
- tree GetNode (1 hop, GET_NODE);
- the gateway's GetSession (3 hops: the gateway, then storage GetSession with the
  slots and tree GetNode with the config in parallel, each one statement);
- the gateway's Fork NONE without request_id (3 hops, 4 internal calls: tree GetConfig,
  then the saga's tree CreateSession, storage Transact (remember the session under the
  saga's key, put the meta, copy the source's system prompt) and tree CommitSession); the
  bare chain makes the same four calls with the same statements and events, without
  idempotency keys.

Before the timing, each gateway scenario's costs are counted on our servers:
internal calls per gateway call from storage's and tree's own metrics (their
/metrics endpoint's stello_rpc_calls, before and after), and SQL statements per
call from pg_stat_statements (the embedded PostgreSQL this starts preloads it;
a STELLO_BENCH_DATABASE_URL server without it gets "not counted"), for ours and
the bare chain alike. GetSession's throughput and CPU per call are then set
against a direct tree GetNode of the same run (#18: >= 0.5x its throughput). Last, unless
--no-up, the `stello up` shape of bench/bench_up.py: the three servers in one process, the
gateway calling the others in-process (or over loopback), GetSession against a direct
GetNode of that process.
A Fork NONE scenario joins by adding its call to `scenario_calls`, its hops to
`HOPS` and its name to `COUNTED` (and, for the bare chain, its handlers).

Ours are the real storage, tree and gateway; the bare ones are grpc.aio servers
with one plain handler per method (no interceptor, auth, validation or domain
layer) running the same SQL constants and answering the same messages. Each
server is its own process (uvloop, the same pool); the client runs here. A
scenario makes a fixed number of calls at a fixed concurrency after a warm-up,
and its CPU is the user + system time (/proc/<pid>/stat, every thread) of the
server processes the call reaches, over that many calls. Ours and bare take
turns, in alternating order, round after round, and the CPU of all rounds is
summed per kind (a busy moment of a shared machine falls on both alike); the
spread of the per-round ratios is printed beside it.

    python bench/bench_overhead.py [--calls 1000] [--concurrency 16] [--rounds 8]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL (with pg_stat_statements) in a temporary folder and
deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_up
from harness import Served, cpu_seconds, run_calls, run_main, served_process, wait_for_stdin_close

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.embedded import embedded_server, ensure_database
from stello.db.migrate import migrate_dsn
from stello.db.pool import create_pool, in_transaction
from stello.formats.timestamps import set_timestamp
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.stored.events import Event, Outbox
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service.app import create_app as storage_app
from storage_service.records.repository import APPEND_RECORDS
from storage_service.sessions.repository import GET_SESSION, PUT_SESSION
from storage_service.slots.repository import COPY_SYSTEM_PROMPT, GET_SESSION_WITH_SLOTS
from tests.support.ports import free_port
from tree_service.app import create_app as tree_app
from tree_service.nodes.repository import GET_NODE, GET_NODE_WITH_CONFIG
from tree_service.sessions.repository import (
    COMMIT_SESSION,
    CREATE_SESSION,
    GET_CONFIG,
    LOCK_FOR_COMMIT,
)

CONTENT = "benchmark record " * 6  # ~100 bytes, a short chat message
STATUS = {
    "active": common_pb2.SESSION_STATUS_ACTIVE,
    "archived": common_pb2.SESSION_STATUS_ARCHIVED,
}
ROLE = {common_pb2.RECORD_ROLE_USER: "user"}
SLOT_KINDS = (
    storage_pb2.SLOT_KIND_SYSTEM_PROMPT,
    storage_pb2.SLOT_KIND_MEMORY,
    storage_pb2.SLOT_KIND_INSIGHT,
)
SERVICES = ("storage", "tree", "gateway")
SCRIPT = str(Path(__file__).resolve())
SLOTS = ("system_prompt", "memory", "insight")
STATEMENTS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(
        database_url=dsn, db_pool_min_size=10, db_pool_max_size=10, auth_cache_ttl_s=60
    )


# ---------------------------------------------------------------- bare servers


def _server(service: str, handlers: dict[str, Any]) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, handlers)])
    return server, server.add_insecure_port("127.0.0.1:0")


def _unary(behaviour: Any, request: Any, response: Any) -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_unary_rpc_method_handler(
        behaviour,
        request_deserializer=request.FromString,
        response_serializer=response.SerializeToString,
    )


def _text(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def bare_storage(pool: asyncpg.Pool) -> tuple[grpc.aio.Server, int]:
    """AppendRecords and GetSession (with the slots asked for) with storage's SQL."""

    async def append(request: Any, context: Any) -> storage_pb2.AppendRecordsResponse:
        records = request.records
        none = [None] * len(records)
        async with pool.acquire() as con:
            rows = await con.fetch(
                APPEND_RECORDS,
                uuid.UUID(request.space_id),
                uuid.UUID(request.session_id),
                [ROLE[r.role] for r in records],
                [r.content for r in records],
                none,
                none,
                none,
                none,
                True,
            )
        reply = storage_pb2.AppendRecordsResponse()
        for row, record in zip(rows, records, strict=True):
            message = reply.records.add(seq=row["seq"], role=record.role, content=record.content)
            set_timestamp(message.created_at, row["created_at"])
        return reply

    async def get_session(request: Any, context: Any) -> storage_pb2.GetSessionResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with pool.acquire() as con:
            if request.slots:
                wanted = [kind in request.slots for kind in SLOT_KINDS]
                row = await con.fetchrow(GET_SESSION_WITH_SLOTS, space, session, *wanted)
            else:
                row = await con.fetchrow(GET_SESSION, space, session)
        assert row is not None
        reply = storage_pb2.GetSessionResponse()
        meta = reply.session
        meta.id, meta.label, meta.status = str(row["id"]), row["label"], STATUS[row["status"]]
        meta.turn_count = row["turn_count"]
        set_timestamp(meta.created_at, row["created_at"])
        set_timestamp(meta.updated_at, row["updated_at"])
        set_timestamp(meta.last_active_at, row["last_active_at"])
        if request.slots:
            reply.slots.session_id = meta.id
            for name in SLOTS:
                if row[name] is not None:
                    setattr(reply.slots, name, row[name])
        return reply

    async def transact(request: Any, context: Any) -> storage_pb2.TransactResponse:
        """A Fork's Transact: put the meta, copy the source's system prompt."""
        space = uuid.UUID(request.space_id)
        put, copy = request.operations[0].put_session, request.operations[1].copy_system_prompt
        session = uuid.UUID(put.session.id)

        async def work(con: asyncpg.Connection) -> storage_pb2.TransactResponse:
            outbox = Outbox()
            row = await con.fetchrow(  # no archive time: it is put active
                PUT_SESSION, space, session, put.session.label, "active", None
            )
            assert row is not None
            outbox.add(space, Event("session_updated", session, if_visible=True))
            copied = await con.fetchrow(
                COPY_SYSTEM_PROMPT, space, session, uuid.UUID(copy.source_id)
            )
            assert copied is not None and copied["copied"]
            outbox.add(space, Event("system_prompt_put", session, if_visible=True))
            await outbox.flush(con)
            reply = storage_pb2.TransactResponse()
            meta = reply.results.add().put_session.session
            meta.id, meta.label, meta.status = str(row["id"]), row["label"], STATUS[row["status"]]
            set_timestamp(meta.created_at, row["created_at"])
            set_timestamp(meta.updated_at, row["updated_at"])
            set_timestamp(meta.last_active_at, row["last_active_at"])
            reply.results.add().copy_system_prompt.copied = True
            return reply

        return await in_transaction(pool, work)

    return _server(
        "stello.storage.v1.SessionStorage",
        {
            "Transact": _unary(transact, storage_pb2.TransactRequest, storage_pb2.TransactResponse),
            "AppendRecords": _unary(
                append, storage_pb2.AppendRecordsRequest, storage_pb2.AppendRecordsResponse
            ),
            "GetSession": _unary(
                get_session, storage_pb2.GetSessionRequest, storage_pb2.GetSessionResponse
            ),
        },
    )


def bare_tree(pool: asyncpg.Pool) -> tuple[grpc.aio.Server, int]:
    """GetNode (with the config when asked) with the tree's SQL."""

    async def get_node(request: Any, context: Any) -> tree_pb2.GetNodeResponse:
        statement = GET_NODE_WITH_CONFIG if request.include_config else GET_NODE
        async with pool.acquire() as con:
            row = await con.fetchrow(
                statement, uuid.UUID(request.space_id), uuid.UUID(request.session_id)
            )
        assert row is not None
        if request.include_config:
            assert row["config"] is None  # the benchmark's session has none
        return tree_pb2.GetNodeResponse(
            node=common_pb2.TopologyNode(
                id=str(row["id"]),
                parent_id=_text(row["parent_id"]),
                children=[str(c) for c in row["children"]],
                refs=[str(r) for r in row["refs"]],
                depth=row["depth"],
                index=row["sibling_index"] or 0,
                label=row["label"],
                source_session_id=_text(row["source_session_id"]),
                status=STATUS[row["status"]],
            )
        )

    async def get_config(request: Any, context: Any) -> tree_pb2.GetConfigResponse:
        async with pool.acquire() as con:
            row = await con.fetchrow(
                GET_CONFIG, uuid.UUID(request.space_id), uuid.UUID(request.session_id)
            )
        assert row is not None and row["config"] is None  # the benchmark's source has none
        return tree_pb2.GetConfigResponse()

    async def create_session(request: Any, context: Any) -> tree_pb2.CreateSessionResponse:
        space, parent = uuid.UUID(request.space_id), uuid.UUID(request.parent_id)

        async def work(con: asyncpg.Connection) -> asyncpg.Record:
            row = await con.fetchrow(
                CREATE_SESSION, space, uuid.uuid4(), parent, request.label, parent, 60.0, None
            )
            assert row is not None and row["parent_found"] and row["source_found"]
            return row

        row = await in_transaction(pool, work)
        return tree_pb2.CreateSessionResponse(
            node=common_pb2.TopologyNode(
                id=str(row["id"]),
                parent_id=str(row["parent_id"]),
                depth=row["depth"],
                label=row["label"],
                source_session_id=str(row["source_session_id"]),
                status=STATUS[row["status"]],
            )
        )

    async def commit_session(request: Any, context: Any) -> tree_pb2.CommitSessionResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)

        async def work(con: asyncpg.Connection) -> asyncpg.Record:
            rows = await con.fetch(LOCK_FOR_COMMIT, space, session)  # it, its parent
            assert any(r["target"] and r["provisional"] for r in rows)
            row = await con.fetchrow(COMMIT_SESSION, space, session)
            assert row is not None
            outbox = Outbox()
            outbox.add(space, Event("session_committed", session))
            await outbox.flush(con)
            return row

        row = await in_transaction(pool, work)
        return tree_pb2.CommitSessionResponse(
            node=common_pb2.TopologyNode(
                id=str(row["id"]),
                parent_id=_text(row["parent_id"]),
                depth=row["depth"],
                index=row["sibling_index"] or 0,
                label=row["label"],
                source_session_id=_text(row["source_session_id"]),
                status=STATUS[row["status"]],
            )
        )

    return _server(
        "stello.tree.v1.SessionTree",
        {
            "GetNode": _unary(get_node, tree_pb2.GetNodeRequest, tree_pb2.GetNodeResponse),
            "GetConfig": _unary(get_config, tree_pb2.GetConfigRequest, tree_pb2.GetConfigResponse),
            "CreateSession": _unary(
                create_session, tree_pb2.CreateSessionRequest, tree_pb2.CreateSessionResponse
            ),
            "CommitSession": _unary(
                commit_session, tree_pb2.CommitSessionRequest, tree_pb2.CommitSessionResponse
            ),
        },
    )


class BareGateway:
    """GetSession as the same two parallel calls to the bare storage and tree servers."""

    def __init__(self, storage: str, tree: str) -> None:
        self._channels = [open_channel(storage), open_channel(tree)]
        self.storage = storage_pb2_grpc.SessionStorageStub(self._channels[0])
        self.tree = tree_pb2_grpc.SessionTreeStub(self._channels[1])

    async def close(self) -> None:
        """Close both channels."""
        for channel in self._channels:
            await channel.close()

    async def get_session(self, request: Any, context: Any) -> agent_pb2.GetSessionResponse:
        space, session = request.space_id, request.session_id
        node, meta = await asyncio.gather(
            self.tree.GetNode(
                tree_pb2.GetNodeRequest(space_id=space, session_id=session, include_config=True)
            ),
            self.storage.GetSession(
                storage_pb2.GetSessionRequest(space_id=space, session_id=session, slots=SLOT_KINDS)
            ),
        )
        view = agent_pb2.SessionView(
            node=node.node,
            turn_count=meta.session.turn_count,
            created_at=meta.session.created_at,
            updated_at=meta.session.updated_at,
            last_active_at=meta.session.last_active_at,
        )
        if node.HasField("config"):
            view.config.CopyFrom(node.config)
        for name in SLOTS:
            if meta.slots.HasField(name):
                setattr(view, name, getattr(meta.slots, name))
        return agent_pb2.GetSessionResponse(session=view)

    async def fork(self, request: Any, context: Any) -> agent_pb2.ForkResponse:
        """Fork NONE in the minimum calls: the source's config, then create, fill, commit."""
        space, source = request.space_id, request.source_session_id
        await self.tree.GetConfig(tree_pb2.GetConfigRequest(space_id=space, session_id=source))
        created = await self.tree.CreateSession(
            tree_pb2.CreateSessionRequest(
                space_id=space,
                parent_id=source,
                label=request.label,
                source_session_id=source,
                provisional=True,
            )
        )
        node = created.node
        Op = storage_pb2.Operation
        filled = await self.storage.Transact(
            storage_pb2.TransactRequest(
                space_id=space,
                operations=[
                    Op(
                        put_session=Op.PutSessionOp(
                            session=common_pb2.SessionMeta(id=node.id, label=node.label)
                        )
                    ),
                    Op(
                        copy_system_prompt=Op.CopySystemPromptOp(
                            session_id=node.id, source_id=source
                        )
                    ),
                ],
            )
        )
        await self.tree.CommitSession(
            tree_pb2.CommitSessionRequest(space_id=space, session_id=node.id)
        )
        meta = filled.results[0].put_session.session
        return agent_pb2.ForkResponse(
            session=common_pb2.SessionSummary(
                id=meta.id,
                label=meta.label,
                status=meta.status,
                parent_id=source,
                created_at=meta.created_at,
                updated_at=meta.updated_at,
                last_active_at=meta.last_active_at,
            )
        )

    def server(self) -> tuple[grpc.aio.Server, int]:
        """A bare AgentGateway server answering GetSession and Fork."""
        return _server(
            "stello.agent.v1.AgentGateway",
            {
                "GetSession": _unary(
                    self.get_session, agent_pb2.GetSessionRequest, agent_pb2.GetSessionResponse
                ),
                "Fork": _unary(self.fork, agent_pb2.ForkRequest, agent_pb2.ForkResponse),
            },
        )


# ---------------------------------------------------------------- serving


async def serve(kind: str, service: str, dsn: str, storage: str, tree: str, metrics: str) -> None:
    """Serve one of the six servers on a free port, print it, run until stdin closes (ours
    expose /metrics on port `metrics` unless it is "-")."""
    settings = _settings(dsn)
    async with AsyncExitStack() as stack:
        pool = await stack.enter_async_context(create_pool(dsn, settings))
        app: ServiceApp | None = None
        if kind == "ours":
            keys = KeyStore(pool, settings.auth_cache_ttl_s)
            if service == "storage":
                app = storage_app(settings, pool, keys)
            elif service == "tree":
                app = tree_app(settings, pool, keys)
            else:
                config = GatewaySettings(storage_address=storage, tree_address=tree)
                app = gateway_app(settings, pool, keys, config)
            if metrics != "-":
                app.metrics_port = int(metrics)
            server, port = await create_server(app, "127.0.0.1:0")
        elif service == "gateway":
            gateway = BareGateway(storage, tree)
            stack.push_async_callback(gateway.close)
            server, port = gateway.server()
        else:
            server, port = (bare_storage if service == "storage" else bare_tree)(pool)
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        if app is not None:
            await shutdown(app, server, 1)
        else:
            await server.stop(1)


# ---------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Fixture:
    """A space and its key, sessions to append to, one session to read (with slots)."""

    space_id: str
    key: str
    append_sessions: list[str]
    read_session: str
    fork_source: str
    """Forked by the Fork NONE scenario (a system prompt slot, no config)."""


INSERT_SESSION = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
VALUES ($1, $2, $2, 0, 'bench')
"""


async def seed(dsn: str) -> Fixture:
    """A fresh space with 64 empty sessions and one with a system prompt and a memory."""
    async with create_pool(dsn, _settings(dsn)) as pool:
        tag = uuid.uuid4().hex[:8]
        created = await KeyStore(pool, 0).create_key(space=f"bench-{tag}", principal=f"bench-{tag}")
        assert created.space_id is not None
        space = created.space_id
        appenders = [uuid.uuid4() for _ in range(64)]
        reader, source = uuid.uuid4(), uuid.uuid4()
        async with pool.acquire() as con:
            await con.executemany(
                INSERT_SESSION, [(space, s) for s in [*appenders, reader, source]]
            )
            await con.execute(
                "INSERT INTO session_slots (space_id, session_id, system_prompt) "
                "VALUES ($1, $2, $3)",
                space,
                source,
                "You fork well. " * 20,
            )
            await con.execute(
                "INSERT INTO session_slots (space_id, session_id, system_prompt, memory) "
                "VALUES ($1, $2, $3, $4)",
                space,
                reader,
                "You are a helpful assistant. " * 20,
                "the user likes short answers",
            )
            await con.execute("ANALYZE sessions; ANALYZE session_slots")
    return Fixture(
        str(space), created.secret, [str(s) for s in appenders], str(reader), str(source)
    )


# ---------------------------------------------------------------- measuring

Call = Callable[[int], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Sample:
    """One scenario's run against one kind: calls, wall time, server CPU (and its split by
    service)."""

    calls: int
    seconds: float
    cpu_s: float
    by_service: tuple[tuple[str, float], ...] = ()

    @property
    def cpu_us_per_call(self) -> float:
        """Server CPU per call, in microseconds."""
        return self.cpu_s / self.calls * 1e6

    @property
    def rps(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds

    @staticmethod
    def total(runs: list[Sample]) -> Sample:
        """The runs taken together."""
        split: Counter[str] = Counter()
        for r in runs:
            split.update(dict(r.by_service))
        return Sample(
            sum(r.calls for r in runs),
            sum(r.seconds for r in runs),
            sum(r.cpu_s for r in runs),
            tuple(split.items()),
        )

    def split_us(self) -> str:
        """Server CPU per call of each service reached, e.g. "gateway 1500 storage 800"."""
        return " ".join(f"{name} {cpu / self.calls * 1e6:.0f}" for name, cpu in self.by_service)


async def measure_once(call: Call, pids: dict[str, int], concurrency: int, total: int) -> Sample:
    """Warm up, then `total` calls; the CPU the processes `pids` (by service) spent on them."""
    await run_calls(call, concurrency, max(200, total // 10))
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.perf_counter()
    await run_calls(call, concurrency, total)
    elapsed = time.perf_counter() - started
    spent = tuple((name, cpu_seconds(pid) - before[name]) for name, pid in pids.items())
    return Sample(total, elapsed, sum(cpu for _, cpu in spent), spent)


def scenario_calls(
    channels: dict[str, grpc.aio.Channel], fx: Fixture
) -> dict[str, tuple[Call, tuple[str, ...]]]:
    """Each scenario's call and the services it reaches (whose CPU counts)."""
    storage = storage_pb2_grpc.SessionStorageStub(channels["storage"])
    tree = tree_pb2_grpc.SessionTreeStub(channels["tree"])
    gateway = agent_pb2_grpc.AgentGatewayStub(channels["gateway"])
    record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=CONTENT)

    async def append(index: int) -> Any:
        session = fx.append_sessions[index % len(fx.append_sessions)]
        return await storage.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=fx.space_id, session_id=session, records=[record]
            )
        )

    async def get_node(index: int) -> Any:
        return await tree.GetNode(
            tree_pb2.GetNodeRequest(space_id=fx.space_id, session_id=fx.read_session)
        )

    async def get_session(index: int) -> Any:
        reply = await gateway.GetSession(
            agent_pb2.GetSessionRequest(space_id=fx.space_id, session_id=fx.read_session)
        )
        assert reply.session.memory
        return reply

    async def fork_none(index: int) -> Any:
        reply = await gateway.Fork(
            agent_pb2.ForkRequest(
                space_id=fx.space_id,
                source_session_id=fx.fork_source,
                label=f"fork {index}",
                context=common_pb2.FORK_CONTEXT_NONE,
            )
        )
        assert reply.session.parent_id == fx.fork_source
        return reply

    return {
        "storage AppendRecords": (append, ("storage",)),
        "tree GetNode": (get_node, ("tree",)),
        "gateway GetSession": (get_session, SERVICES),
        "gateway Fork NONE": (fork_none, SERVICES),
    }


HOPS = {
    "storage AppendRecords": 1,
    "tree GetNode": 1,
    "gateway GetSession": 3,
    "gateway Fork NONE": 3,
}
COUNTED = ("gateway GetSession", "gateway Fork NONE")
"""The gateway scenarios whose internal calls and statements are counted."""
AGAINST = {"gateway GetSession": ("tree GetNode", 0.5)}
"""A scenario set against another of the same run: its throughput must be at least this
fraction of the other's (#18)."""
COUNT_CALLS = 200


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind's server processes and the /metrics ports of storage and tree (ours only)."""

    served: dict[str, Served]
    metrics: dict[str, int]


async def start_kind(stack: AsyncExitStack, kind: str, dsn: str) -> Kind:
    """The storage, tree and gateway processes of `kind` (ours or bare)."""
    metrics = {name: free_port() for name in ("storage", "tree")} if kind == "ours" else {}

    def port(name: str) -> str:
        return str(metrics[name]) if name in metrics else "-"

    storage = await stack.enter_async_context(
        served_process(SCRIPT, kind, "storage", dsn, "-", "-", port("storage"))
    )
    tree = await stack.enter_async_context(
        served_process(SCRIPT, kind, "tree", dsn, "-", "-", port("tree"))
    )
    gateway = await stack.enter_async_context(
        served_process(SCRIPT, kind, "gateway", dsn, storage.address, tree.address, "-")
    )
    return Kind({"storage": storage, "tree": tree, "gateway": gateway}, metrics)


# ---------------------------------------------------------------- counting

CALLS_LINE = re.compile(r"^stello_rpc_calls_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
METHOD_LABEL = re.compile(r'method="(?P<method>[^"]*)"')


def rpc_calls(port: int) -> Counter[str]:
    """The calls a server handled so far, by method (its own stello_rpc_calls metric)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        found = CALLS_LINE.match(line)
        if found is None:
            continue
        method = METHOD_LABEL.search(found["labels"])
        if method is not None:
            counts[method["method"].rpartition("/")[2]] += int(float(found["value"]))
    return counts


STATEMENTS_SEEN = """
SELECT s.query, s.calls
FROM pg_stat_statements s
JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = current_database() AND s.query NOT LIKE '%pg_stat_statements%'
"""


async def statements_counted(con: asyncpg.Connection) -> bool:
    """Whether pg_stat_statements counts this server's statements (created if loaded)."""
    loaded = await con.fetchval("SHOW shared_preload_libraries")
    if "pg_stat_statements" not in loaded:
        return False
    await con.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


@dataclass(frozen=True, slots=True)
class Costs:
    """What `calls` gateway calls of one scenario cost: internal calls (None: not counted)
    by service and method, and statements by text (None: not counted)."""

    calls: int
    internal: dict[str, Counter[str]] | None
    statements: dict[str, int] | None

    def internal_per_call(self) -> float | None:
        """Internal calls per gateway call."""
        if self.internal is None:
            return None
        return sum(sum(c.values()) for c in self.internal.values()) / self.calls

    def per_call_statements(self) -> dict[str, int]:
        """The statements run at least once per gateway call (the rest is background: health
        pings, the sweeper), with how many times per call."""
        found = self.statements or {}
        return {q: n // self.calls for q, n in found.items() if n >= self.calls}


async def count_costs(call: Call, kind: Kind, dsn: str, total: int) -> Costs:
    """Make `total` calls one at a time and count what they cost (nothing else runs)."""
    con = await asyncpg.connect(dsn)
    try:
        counting = await statements_counted(con)
        await run_calls(call, 1, 20)  # warm: auth caches, prepared statements
        before = {name: rpc_calls(port) for name, port in kind.metrics.items()}
        if counting:
            await con.execute("SELECT pg_stat_statements_reset()")
        await run_calls(call, 1, total)
        statements = None
        if counting:
            rows = await con.fetch(STATEMENTS_SEEN)
            statements = {" ".join(row["query"].split()): row["calls"] for row in rows}
        internal = None
        if kind.metrics:
            internal = {name: rpc_calls(port) - before[name] for name, port in kind.metrics.items()}
    finally:
        await con.close()
    return Costs(total, internal, statements)


def print_costs(name: str, kind: str, costs: Costs) -> None:
    """One scenario's counted costs, per gateway call."""
    internal = costs.internal_per_call()
    if internal is not None and costs.internal is not None:
        by_method = ", ".join(
            f"{service} {method} {n / costs.calls:g}"
            for service, counts in costs.internal.items()
            for method, n in sorted(counts.items())
        )
        print(f"  {name} ({kind}): {internal:g} internal calls per call ({by_method})")
    if costs.statements is None:
        print(f"  {name} ({kind}): statements not counted (pg_stat_statements not loaded)")
        return
    per_call = costs.per_call_statements()
    print(f"  {name} ({kind}): {sum(per_call.values())} SQL statements per call:")
    for query, n in sorted(per_call.items()):
        print(f"    {n} x {query[:110]}")


# ---------------------------------------------------------------- measuring both


async def measure(
    dsn: str, fx: Fixture, total: int, concurrency: int, rounds: int
) -> dict[tuple[str, str], list[Sample]]:
    """Count the gateway scenarios' costs, then every scenario on both kinds, `rounds` times,
    the two kinds taking turns (in alternating order) so that a busy moment of the machine
    falls on both alike."""
    samples: dict[tuple[str, str], list[Sample]] = {}
    async with AsyncExitStack() as stack:
        kinds = {kind: await start_kind(stack, kind, dsn) for kind in ("bare", "ours")}
        calls = {}
        for kind, started in kinds.items():
            channels = {
                name: open_channel(s.address, key=fx.key if kind == "ours" else None)
                for name, s in started.served.items()
            }
            for channel in channels.values():
                stack.push_async_callback(channel.close)
            calls[kind] = scenario_calls(channels, fx)
        print(f"counted over {COUNT_CALLS} sequential calls:", flush=True)
        for name in COUNTED:
            for kind in ("ours", "bare"):
                costs = await count_costs(calls[kind][name][0], kinds[kind], dsn, COUNT_CALLS)
                print_costs(name, kind, costs)
        print("timed:", flush=True)
        for name in HOPS:
            for index in range(rounds):
                order = ("bare", "ours") if index % 2 == 0 else ("ours", "bare")
                for kind in order:
                    call, reached = calls[kind][name]
                    pids = {service: kinds[kind].served[service].pid for service in reached}
                    sample = await measure_once(call, pids, concurrency, total)
                    samples.setdefault((name, kind), []).append(sample)
            bare = Sample.total(samples[(name, "bare")])
            ours = Sample.total(samples[(name, "ours")])
            print(
                f"  {name:22} bare {bare.cpu_us_per_call:5.0f} µs, ours "
                f"{ours.cpu_us_per_call:5.0f} µs server CPU per call (rounds: "
                + " ".join(f"{r:.2f}x" for r in round_ratios(samples, name))
                + ")",
                flush=True,
            )
    return samples


def round_ratios(samples: dict[tuple[str, str], list[Sample]], name: str) -> list[float]:
    """ours / bare CPU per call of each round of `name`."""
    return [
        ours.cpu_us_per_call / bare.cpu_us_per_call
        for bare, ours in zip(samples[(name, "bare")], samples[(name, "ours")], strict=True)
    ]


def report(samples: dict[tuple[str, str], list[Sample]], concurrency: int) -> None:
    """The table: server CPU per call and per hop, ours against bare, and throughput; then
    each scenario set against another (AGAINST)."""
    print()
    print(
        f"{'scenario':22} {'hops':>4} {'bare µs':>8} {'ours µs':>8} {'ours/bare':>9} "
        f"{'rounds min-max':>15} {'per hop bare/ours µs':>21} {'calls/s bare/ours':>18}"
    )
    ratios = []
    for name, hops in HOPS.items():
        bare = Sample.total(samples[(name, "bare")])
        ours = Sample.total(samples[(name, "ours")])
        ratio = ours.cpu_us_per_call / bare.cpu_us_per_call
        ratios.append(ratio)
        spread = round_ratios(samples, name)
        per_hop = f"{bare.cpu_us_per_call / hops:.0f}/{ours.cpu_us_per_call / hops:.0f}"
        print(
            f"{name:22} {hops:>4} {bare.cpu_us_per_call:>8.0f} {ours.cpu_us_per_call:>8.0f} "
            f"{ratio:>8.2f}x {f'{min(spread):.2f}-{max(spread):.2f}x':>15} {per_hop:>21} "
            f"{bare.rps:>8.0f}/{ours.rps:<8.0f}"
        )
    print(
        f"target per hop <= 1.3x: worst {max(ratios):.2f}x, geometric mean "
        f"{statistics.geometric_mean(ratios):.2f}x (concurrency {concurrency}; "
        f"cpus: {os.cpu_count()}, client, servers and PostgreSQL share them)"
    )
    for name, (other, target) in AGAINST.items():
        for kind in ("ours", "bare"):
            mine = Sample.total(samples[(name, kind)])
            base = Sample.total(samples[(other, kind)])
            print(
                f"{name} against {other} ({kind}): throughput {mine.rps:.0f}/{base.rps:.0f} "
                f"calls/s = {mine.rps / base.rps:.2f}x (target >= {target}x), server CPU per "
                f"call {mine.cpu_us_per_call:.0f}/{base.cpu_us_per_call:.0f} µs = "
                f"{mine.cpu_us_per_call / base.cpu_us_per_call:.2f}x ({mine.split_us()} µs)"
            )


@asynccontextmanager
async def database() -> AsyncIterator[str]:
    """STELLO_BENCH_DATABASE_URL, or a fresh embedded PostgreSQL preloading
    pg_stat_statements, deleted afterwards."""
    configured = os.environ.get("STELLO_BENCH_DATABASE_URL")
    if configured:
        await migrate_dsn(configured)
        yield configured
        return
    folder = Path(tempfile.mkdtemp(prefix="stello-bench-pg-"))
    with embedded_server(folder / "data", delete=True, config=STATEMENTS) as admin_dsn:
        dsn = await ensure_database(admin_dsn, "stello_bench")
        await migrate_dsn(dsn)
        yield dsn


async def run(total: int, concurrency: int, rounds: int, up: bool) -> None:
    """Seed, count and measure both kinds, report; then, with `up`, the `stello up` shape."""
    async with database() as dsn:
        fx = await seed(dsn)
        samples = await measure(dsn, fx, total, concurrency, rounds)
        report(samples, concurrency)
        if up:
            print()
            print("== the `stello up` shape (bench/bench_up.py): one process, in-process calls")
            await bench_up.run_on(dsn, total, concurrency, max(2, rounds // 2))


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one of its servers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["ours", "bare"])
    serve_cmd.add_argument("service", choices=SERVICES)
    serve_cmd.add_argument("dsn")
    serve_cmd.add_argument("storage")
    serve_cmd.add_argument("tree")
    serve_cmd.add_argument("metrics", help='port of /metrics (ours), or "-"')
    parser.add_argument("--calls", type=int, default=1000, help="per round and kind")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=8, help="turns each kind takes")
    parser.add_argument(
        "--no-up", action="store_true", help="skip the `stello up` shape (bench/bench_up.py)"
    )
    args = parser.parse_args()
    coroutine = (
        serve(args.kind, args.service, args.dsn, args.storage, args.tree, args.metrics)
        if args.command == "serve"
        else run(args.calls, args.concurrency, args.rounds, not args.no_up)
    )
    run_main(coroutine)


if __name__ == "__main__":
    main()
