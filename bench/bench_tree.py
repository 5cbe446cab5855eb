"""Tree benchmark: our SessionTree against a bare grpc.aio server running the same SQL.

Measured in one run (DESIGN §9): CreateSession(provisional) + CommitSession at
concurrency 1 and 16 (16 workers, one parent each), GetAncestors of a node at
depth 1,000, and GetTree of a 100,000-node tree; both trees are seeded with COPY.
Each server runs in its own process (uvloop, the same pool settings); the client
runs here. Prints throughput, p50, p99 and the ratio ours / baseline. Not part
of the test run.

    python bench/bench_tree.py [--seconds 4] [--rounds 3] [--tree-nodes 100000]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import (
    Call,
    Result,
    database,
    load,
    repeat,
    run_main,
    server_process,
    wait_for_stdin_close,
)

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.serving.server import create_server
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.tree.seed import seed_topology  # the tests' COPY seeding, shared
from tree_service import create_app
from tree_service.nodes.repository import ANCESTRY, GET_NODE
from tree_service.sessions.repository import (
    COMMIT_SESSION,
    CREATE_SESSION,
    LOCK_FOR_COMMIT,
    LOCK_PARENT,
)
from tree_service.trees.repository import FOREST

SERVICE = "stello.tree.v1.SessionTree"
WORKERS = 16
CHAIN_DEPTH = 1_000
ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
STATUS = {"active": ACTIVE, "archived": common_pb2.SESSION_STATUS_ARCHIVED}


# ---------------------------------------------------------------- servers


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(database_url=dsn, db_pool_min_size=20, db_pool_max_size=20)


def _text(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def _node(row: asyncpg.Record) -> common_pb2.TopologyNode:
    return common_pb2.TopologyNode(
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


async def _baseline_server(pool: asyncpg.Pool) -> tuple[grpc.aio.Server, int]:
    """A bare grpc.aio server: no interceptors, no validation, no layers, the same SQL."""

    async def create(
        request: tree_pb2.CreateSessionRequest, context: Any
    ) -> tree_pb2.CreateSessionResponse:
        space = uuid.UUID(request.space_id)
        parent = uuid.UUID(request.parent_id)
        session = uuid.uuid4()
        async with pool.acquire() as con, con.transaction():
            if not request.provisional:
                assert await con.fetchrow(LOCK_PARENT, space, parent) is not None
            row = await con.fetchrow(
                CREATE_SESSION,
                space,
                session,
                parent,
                request.label or "Session",
                None,
                60.0 if request.provisional else None,
                None,
            )
        assert row is not None
        return tree_pb2.CreateSessionResponse(
            node=common_pb2.TopologyNode(
                id=str(row["id"]),
                parent_id=str(parent),
                depth=row["depth"],
                index=row["sibling_index"] or 0,
                label=row["label"],
                status=ACTIVE,
            )
        )

    async def commit(
        request: tree_pb2.CommitSessionRequest, context: Any
    ) -> tree_pb2.CommitSessionResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with pool.acquire() as con, con.transaction():
            # The session and its provisional parent, in id order (the service's lock).
            locked = await con.fetch(LOCK_FOR_COMMIT, space, session)
            provisional = next((r["provisional"] for r in locked if r["target"]), None)
            assert provisional is not None
            if provisional:
                row = await con.fetchrow(COMMIT_SESSION, space, session)
            else:
                row = await con.fetchrow(GET_NODE, space, session)
        assert row is not None
        return tree_pb2.CommitSessionResponse(node=_node(row))

    async def ancestors(
        request: tree_pb2.GetAncestorsRequest, context: Any
    ) -> tree_pb2.GetAncestorsResponse:
        async with pool.acquire() as con:
            rows = await con.fetch(
                ANCESTRY, uuid.UUID(request.space_id), uuid.UUID(request.session_id)
            )
        return tree_pb2.GetAncestorsResponse(nodes=[_node(r) for r in rows[1:]])

    async def tree(request: tree_pb2.GetTreeRequest, context: Any) -> tree_pb2.GetTreeResponse:
        async with pool.acquire() as con:
            rows = await con.fetch(FOREST, uuid.UUID(request.space_id), 200_001)
        tops = sorted(
            (r for r in rows if r["top_at"] is not None), key=lambda r: (r["top_at"], r["id"])
        )
        children: dict[uuid.UUID, list[asyncpg.Record]] = {}
        for row in rows:
            if row["top_at"] is None:
                children.setdefault(row["parent_id"], []).append(row)
        for siblings in children.values():
            siblings.sort(key=lambda r: r["sibling_index"])
        nodes = []
        stack = list(reversed(tops))
        while stack:
            row = stack.pop()
            nodes.append(
                common_pb2.TreeNode(
                    id=str(row["id"]),
                    parent_id=_text(row["parent_id"]),
                    depth=row["depth"],
                    index=row["sibling_index"] or 0,
                    label=row["label"],
                    status=STATUS[row["status"]],
                    turn_count=row["turn_count"],
                    source_session_id=_text(row["source_session_id"]),
                )
            )
            stack.extend(reversed(children.get(row["id"], ())))
        return tree_pb2.GetTreeResponse(nodes=nodes)

    def handler(behaviour: Any, request: Any, response: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            behaviour,
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )

    handlers = {
        "CreateSession": handler(
            create, tree_pb2.CreateSessionRequest, tree_pb2.CreateSessionResponse
        ),
        "CommitSession": handler(
            commit, tree_pb2.CommitSessionRequest, tree_pb2.CommitSessionResponse
        ),
        "GetAncestors": handler(
            ancestors, tree_pb2.GetAncestorsRequest, tree_pb2.GetAncestorsResponse
        ),
        "GetTree": handler(tree, tree_pb2.GetTreeRequest, tree_pb2.GetTreeResponse),
    }
    limit = _settings("").max_message_bytes
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", limit),
        ]
    )
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    return server, port


async def serve(kind: str, dsn: str) -> None:
    """Run one server until stdin closes; print its port first."""
    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        if kind == "ours":
            server, port = await create_server(
                create_app(settings, pool, KeyStore(pool)), "127.0.0.1:0"
            )
        else:
            server, port = await _baseline_server(pool)
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        await server.stop(1)


# ---------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Fixture:
    """Two spaces: one with parents and a deep chain, one holding only the big tree."""

    space_id: uuid.UUID
    key: str
    parents: list[uuid.UUID]
    deep_node: uuid.UUID
    tree_space_id: uuid.UUID
    tree_key: str
    tree_nodes: int


async def seed(dsn: str, tree_nodes: int) -> Fixture:
    """WORKERS parent roots and a CHAIN_DEPTH chain in one space; a 10-ary tree in another."""
    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool)
        tag = uuid.uuid4().hex[:8]
        main = await keys.create_key(space=f"bench-{tag}")
        big = await keys.create_key(space=f"bench-tree-{tag}")
        assert main.space_id is not None and big.space_id is not None
        started = time.perf_counter()
        parent_ids = await seed_topology(pool, main.space_id, [None] * WORKERS)
        chain_ids = await seed_topology(pool, main.space_id, [None, *range(CHAIN_DEPTH)])
        tree = [None, *((i - 1) // 10 for i in range(1, tree_nodes))]
        await seed_topology(pool, big.space_id, tree)
        async with pool.acquire() as con:
            await con.execute("VACUUM (ANALYZE) sessions")
            await con.execute("CHECKPOINT")
        seeded = len(parent_ids) + len(chain_ids) + len(tree)
        print(f"seeded {seeded:,} sessions by COPY in {time.perf_counter() - started:.1f}s")
    return Fixture(
        main.space_id,
        main.secret,
        parent_ids,
        chain_ids[-1],
        big.space_id,
        big.secret,
        tree_nodes,
    )


# ---------------------------------------------------------------- load


def scenario_calls(
    stub: tree_pb2_grpc.SessionTreeStub, tree_stub: tree_pb2_grpc.SessionTreeStub, fx: Fixture
) -> dict[str, Call]:
    """The calls each scenario makes; `index` is the worker number."""
    space = str(fx.space_id)

    async def fork(index: int) -> Any:
        parent = str(fx.parents[index % len(fx.parents)])
        created = await stub.CreateSession(
            tree_pb2.CreateSessionRequest(
                space_id=space, parent_id=parent, label="bench", provisional=True
            )
        )
        return await stub.CommitSession(
            tree_pb2.CommitSessionRequest(space_id=space, session_id=created.node.id)
        )

    async def ancestors(index: int) -> Any:
        reply = await stub.GetAncestors(
            tree_pb2.GetAncestorsRequest(space_id=space, session_id=str(fx.deep_node))
        )
        assert len(reply.nodes) == CHAIN_DEPTH
        return reply

    async def tree(index: int) -> Any:
        reply = await tree_stub.GetTree(tree_pb2.GetTreeRequest(space_id=str(fx.tree_space_id)))
        assert len(reply.nodes) == fx.tree_nodes
        return reply

    return {
        "Create+CommitSession": fork,
        f"GetAncestors d={CHAIN_DEPTH}": ancestors,
        "GetTree": tree,
    }


def scenarios(fx: Fixture) -> list[tuple[str, int]]:
    """(name, concurrency) of every measurement; concurrency 0 = sequential repeats."""
    return [
        ("Create+CommitSession", 1),
        ("Create+CommitSession", WORKERS),
        (f"GetAncestors d={CHAIN_DEPTH}", 1),
        (f"GetAncestors d={CHAIN_DEPTH}", WORKERS),
        ("GetTree", 0),
    ]


async def measure(
    dsn: str, fx: Fixture, seconds: float, rounds: int, tree_repeats: int
) -> dict[tuple[str, str, int], Result]:
    """Every scenario against both servers, interleaved, `rounds` times; the median round kept."""
    samples: dict[tuple[str, str, int], list[Result]] = {}
    async with (
        server_process(__file__, "baseline", dsn) as base,
        server_process(__file__, "ours", dsn) as ours,
    ):
        channels = {
            kind: (open_channel(address, key=fx.key), open_channel(address, key=fx.tree_key))
            for kind, address in (("baseline", base), ("ours", ours))
        }
        calls = {
            kind: scenario_calls(
                tree_pb2_grpc.SessionTreeStub(main), tree_pb2_grpc.SessionTreeStub(big), fx
            )
            for kind, (main, big) in channels.items()
        }
        for round_index in range(rounds):
            kinds = ("baseline", "ours") if round_index % 2 == 0 else ("ours", "baseline")
            for name, concurrency in scenarios(fx):
                for kind in kinds:
                    call = calls[kind][name]
                    if concurrency:
                        result = await load(call, concurrency, seconds)
                    else:
                        result = await repeat(call, tree_repeats)
                    samples.setdefault((name, kind, concurrency), []).append(result)
                    print(
                        f"  round {round_index + 1} {kind:8} {name:22} c={concurrency or 1:<3} "
                        f"{result.rps:8.1f} rps  p50 {result.quantile(0.5):8.2f} ms  "
                        f"p99 {result.quantile(0.99):8.2f} ms",
                        flush=True,
                    )
        for pair in channels.values():
            for channel in pair:
                await channel.close()
    return {key: sorted(runs, key=lambda r: r.rps)[len(runs) // 2] for key, runs in samples.items()}


def report(fx: Fixture, results: dict[tuple[str, str, int], Result]) -> None:
    """The table of the run: throughput, p50, p99 and ours / baseline."""
    print()
    print(
        f"{'scenario':26} {'c':>3} {'baseline rps':>13} {'ours rps':>9} {'ratio':>6} "
        f"{'p50 base/ours ms':>19} {'p99 base/ours ms':>19}"
    )
    for name, concurrency in scenarios(fx):
        base = results[(name, "baseline", concurrency)]
        ours = results[(name, "ours", concurrency)]
        label = f"{name} {fx.tree_nodes:,}" if name == "GetTree" else name
        print(
            f"{label:26} {concurrency or 1:>3} {base.rps:>13.1f} {ours.rps:>9.1f} "
            f"{ours.rps / base.rps:>6.0%} "
            f"{base.quantile(0.5):>9.2f}/{ours.quantile(0.5):<9.2f} "
            f"{base.quantile(0.99):>9.2f}/{ours.quantile(0.99):<9.2f}"
        )
    print("(Create+CommitSession counts pairs: two RPCs per call)")
    print(f"(cpus: {os.cpu_count()}; client, servers and PostgreSQL share them)")


async def run(seconds: float, rounds: int, tree_nodes: int, tree_repeats: int) -> None:
    """Seed, measure both servers, report."""
    async with database() as dsn:
        fx = await seed(dsn, tree_nodes)
        results = await measure(dsn, fx, seconds, rounds, tree_repeats)
        report(fx, results)


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one side of it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["ours", "baseline"])
    serve_cmd.add_argument("dsn")
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="median of this many")
    parser.add_argument("--tree-nodes", type=int, default=100_000)
    parser.add_argument("--tree-repeats", type=int, default=5, help="GetTree calls per round")
    args = parser.parse_args()
    coroutine = (
        serve(args.kind, args.dsn)
        if args.command == "serve"
        else run(args.seconds, args.rounds, args.tree_nodes, args.tree_repeats)
    )
    run_main(coroutine)


if __name__ == "__main__":
    main()
