"""Storage benchmark: our SessionStorage against a bare grpc.aio server running the same SQL.

Measured in one run (DESIGN §9): AppendRecords at concurrency 1 and 64 (64
spread over 64 sessions), and ListRecords newest 50 of one session in a
1,000,000-record table seeded with COPY. Each server runs in its own process
(uvloop, the same pool settings); the client runs here. Prints throughput,
p50, p99 and the ratio ours / baseline. Not part of the test run.

    python bench/bench_storage.py [--seconds 5] [--records 1000000]

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Call, Result, database, load, run_main, server_process, wait_for_stdin_close

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.formats.timestamps import set_timestamp
from stello.rules.tokens import record_tokens
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from storage_service.config import StorageSettings
from storage_service.convert import ROLE_TO_PROTO
from storage_service.models import MAX_SEQ
from storage_service.records.repository import APPEND_RECORDS, LIST_RECORDS_NEWEST
from tests.support.history import COLUMNS  # the tests' COPY of records, shared

SERVICE = "stello.storage.v1.SessionStorage"
CONTENT = "benchmark record " * 6  # ~100 bytes, a short chat message
PAGE_BYTES = StorageSettings().max_page_bytes  # the byte bound ours applies (same SQL)


# ---------------------------------------------------------------- servers


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(database_url=dsn, db_pool_min_size=20, db_pool_max_size=20)


def baseline_handlers(pool: asyncpg.Pool) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """The baseline's two methods: no validation, no domain layer, the same SQL."""

    async def append(
        request: storage_pb2.AppendRecordsRequest, context: Any
    ) -> storage_pb2.AppendRecordsResponse:
        records = request.records
        async with pool.acquire() as con:
            rows = await con.fetch(
                APPEND_RECORDS,
                uuid.UUID(request.space_id),
                uuid.UUID(request.session_id),
                ["user" for _ in records],
                [r.content for r in records],
                [None for _ in records],
                [None for _ in records],
                [None for _ in records],
                [None for _ in records],
                True,
            )
        reply = storage_pb2.AppendRecordsResponse()
        for row, record in zip(rows, records, strict=True):
            message = reply.records.add(seq=row["seq"], role=record.role, content=record.content)
            set_timestamp(message.created_at, row["created_at"])
        return reply

    async def list_records(
        request: storage_pb2.ListRecordsRequest, context: Any
    ) -> storage_pb2.ListRecordsResponse:
        async with pool.acquire() as con:
            rows = await con.fetch(
                LIST_RECORDS_NEWEST,
                uuid.UUID(request.space_id),
                uuid.UUID(request.session_id),
                -MAX_SEQ,
                MAX_SEQ,
                None,
                0,
                request.limit,
                PAGE_BYTES,
            )
        reply = storage_pb2.ListRecordsResponse()
        for row in reversed(rows):
            message = reply.records.add(
                seq=row["seq"], role=ROLE_TO_PROTO[row["role"]], content=row["content"]
            )
            set_timestamp(message.created_at, row["created_at"])
        return reply

    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "AppendRecords": grpc.unary_unary_rpc_method_handler(
            append,
            request_deserializer=storage_pb2.AppendRecordsRequest.FromString,
            response_serializer=storage_pb2.AppendRecordsResponse.SerializeToString,
        ),
        "ListRecords": grpc.unary_unary_rpc_method_handler(
            list_records,
            request_deserializer=storage_pb2.ListRecordsRequest.FromString,
            response_serializer=storage_pb2.ListRecordsResponse.SerializeToString,
        ),
    }
    return handlers


async def _baseline_server(pool: asyncpg.Pool) -> tuple[grpc.aio.Server, int]:
    """A bare grpc.aio server (no interceptors) serving `baseline_handlers`."""
    server = grpc.aio.server()
    generic = grpc.method_handlers_generic_handler(SERVICE, baseline_handlers(pool))
    server.add_generic_rpc_handlers([generic])
    port = server.add_insecure_port("127.0.0.1:0")
    return server, port


async def serve(kind: str, dsn: str) -> None:
    """Run one server until stdin closes; print its port first."""
    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        app = create_app(settings, pool, KeyStore(pool)) if kind == "ours" else None
        if app is not None:
            server, port = await create_server(app, "127.0.0.1:0")
        else:
            server, port = await _baseline_server(pool)
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
    """What the load needs: a space, its key, sessions to append to, one big session to read."""

    space_id: uuid.UUID
    key: str
    append_sessions: list[uuid.UUID]
    read_session: uuid.UUID


INSERT_SESSION = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label, last_seq, token_total)
VALUES ($1, $2, $2, 0, 'bench', $3, $4)
"""


async def seed(dsn: str, total_records: int) -> Fixture:
    """A space with 64 empty sessions and `total_records` records spread over 1000 sessions.

    The session that is read holds a tenth of the records; all come in by COPY.
    """
    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        created = await KeyStore(pool).create_key(space=f"bench-{uuid.uuid4().hex[:8]}")
        assert created.space_id is not None
        space_id = created.space_id
        readers = [uuid.uuid4() for _ in range(1000)]
        sizes = [(total_records - total_records // 10) // 999] * 1000
        sizes[0] = total_records - sum(sizes[1:])
        appenders = [uuid.uuid4() for _ in range(64)]
        tokens = record_tokens(CONTENT)  # each record's estimate, as an append counts it
        async with pool.acquire() as con:
            await con.executemany(
                INSERT_SESSION,
                [(space_id, s, n, n * tokens) for s, n in zip(readers, sizes, strict=True)]
                + [(space_id, s, 0, 0) for s in appenders],
            )
            now = datetime.now(UTC)
            started = time.perf_counter()
            rows = (
                (
                    space_id,
                    session,
                    seq,
                    "user" if seq % 2 else "assistant",
                    CONTENT,
                    now,
                    tokens,
                    seq * tokens,
                )
                for session, count in zip(readers, sizes, strict=True)
                for seq in range(1, count + 1)
            )
            await con.copy_records_to_table(
                "records",
                records=rows,
                columns=COLUMNS,
            )
            # Settle the new table now, not during a measurement.
            await con.execute("VACUUM (ANALYZE) records")
            await con.execute("CHECKPOINT")
            count = await con.fetchval("SELECT count(*) FROM records WHERE space_id = $1", space_id)
            print(f"seeded {count:,} records by COPY in {time.perf_counter() - started:.1f}s")
    return Fixture(space_id, created.secret, appenders, readers[0])


# ---------------------------------------------------------------- load


def scenario_calls(stub: storage_pb2_grpc.SessionStorageStub, fx: Fixture) -> dict[str, Call]:
    """The calls each scenario makes; `index` is the worker number."""
    space = str(fx.space_id)
    record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=CONTENT)

    async def append(index: int) -> Any:
        session = str(fx.append_sessions[index % len(fx.append_sessions)])
        request = storage_pb2.AppendRecordsRequest(
            space_id=space, session_id=session, records=[record]
        )
        return await stub.AppendRecords(request)

    async def newest(index: int) -> Any:
        request = storage_pb2.ListRecordsRequest(
            space_id=space, session_id=str(fx.read_session), limit=50, newest_first=True
        )
        reply = await stub.ListRecords(request)
        assert len(reply.records) == 50
        return reply

    return {"AppendRecords": append, "ListRecords newest 50": newest}


async def measure(
    dsn: str, fx: Fixture, seconds: float, rounds: int
) -> dict[tuple[str, str, int], Result]:
    """Every scenario against both servers, interleaved, `rounds` times; the median round kept.

    Both servers run for the whole measurement and take turns per scenario (in
    alternating order each round), so background work of the database (a
    checkpoint, autovacuum) cannot favour one side.
    """
    samples: dict[tuple[str, str, int], list[Result]] = {}
    async with (
        server_process(__file__, "baseline", dsn) as base,
        server_process(__file__, "ours", dsn) as ours,
    ):
        channels = {
            kind: open_channel(address, key=fx.key)
            for kind, address in (("baseline", base), ("ours", ours))
        }
        calls = {
            kind: scenario_calls(storage_pb2_grpc.SessionStorageStub(channel), fx)
            for kind, channel in channels.items()
        }
        for round_index in range(rounds):
            kinds = ("baseline", "ours") if round_index % 2 == 0 else ("ours", "baseline")
            for name in ("AppendRecords", "ListRecords newest 50"):
                for concurrency in (1, 64):
                    for kind in kinds:
                        result = await load(calls[kind][name], concurrency, seconds)
                        samples.setdefault((name, kind, concurrency), []).append(result)
                        print(
                            f"  round {round_index + 1} {kind:8} {name:22} c={concurrency:<3} "
                            f"{result.rps:8.0f} rps  p50 {result.quantile(0.5):6.2f} ms  "
                            f"p99 {result.quantile(0.99):6.2f} ms",
                            flush=True,
                        )
        for channel in channels.values():
            await channel.close()
    return {key: sorted(runs, key=lambda r: r.rps)[len(runs) // 2] for key, runs in samples.items()}


def report(results: dict[tuple[str, str, int], Result]) -> None:
    """The table of the run: throughput, p50, p99 and ours / baseline."""
    print()
    print(
        f"{'scenario':26} {'c':>3} {'baseline rps':>13} {'ours rps':>9} {'ratio':>6} "
        f"{'p50 base/ours ms':>17} {'p99 base/ours ms':>17}"
    )
    for name in ("AppendRecords", "ListRecords newest 50"):
        for concurrency in (1, 64):
            base = results[(name, "baseline", concurrency)]
            ours = results[(name, "ours", concurrency)]
            print(
                f"{name:26} {concurrency:>3} {base.rps:>13.0f} {ours.rps:>9.0f} "
                f"{ours.rps / base.rps:>6.0%} "
                f"{base.quantile(0.5):>8.2f}/{ours.quantile(0.5):<8.2f} "
                f"{base.quantile(0.99):>8.2f}/{ours.quantile(0.99):<8.2f}"
            )
    print(f"(cpus: {os.cpu_count()}; client, servers and PostgreSQL share them)")


async def run(seconds: float, total_records: int, rounds: int) -> None:
    """Seed, measure both servers, report."""
    async with database() as dsn:
        fx = await seed(dsn, total_records)
        results = await measure(dsn, fx, seconds, rounds)
        report(results)


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one side of it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["ours", "baseline"])
    serve_cmd.add_argument("dsn")
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="median of this many")
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    coroutine = (
        serve(args.kind, args.dsn)
        if args.command == "serve"
        else run(args.seconds, args.records, args.rounds)
    )
    run_main(coroutine)


if __name__ == "__main__":
    main()
