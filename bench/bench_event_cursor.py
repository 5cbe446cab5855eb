"""The cost of WatchSpace's cursor schemes to concurrent writers of one space (DESIGN §4.6).

Writers commit small transactions shaped like an append (lock the session's row,
insert a record, write its event) in one space, each on its own session:

- ``no event``: the write alone (the floor);
- ``xid horizon``: the event stores ``pg_current_xact_id()`` (readers deliver
  only below ``pg_snapshot_xmin``): nothing is shared between writers;
- ``space position``: the event takes the space's next position as the last
  statement, so the position row's lock is held through every commit and the
  writers of one space commit one at a time (positions in commit order);
- ``space position, 8 spaces``: the same with each writer in its own space.

Runs at SQL level on the embedded PostgreSQL (durable commits), in scratch tables
of its own; scenarios take turns in each round and the median round is kept.

    python bench/bench_event_cursor.py [--writers 8] [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Result, run_main

from stello.db.embedded import embedded_server, ensure_database

SCHEMA = """
CREATE TABLE b_sessions (space_id uuid, id uuid, last_seq bigint NOT NULL DEFAULT 0,
                         PRIMARY KEY (space_id, id));
CREATE TABLE b_records (space_id uuid, session_id uuid, seq bigint, content text,
                        PRIMARY KEY (space_id, session_id, seq));
CREATE TABLE b_events_xid (space_id uuid, xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
                           id bigint GENERATED ALWAYS AS IDENTITY, kind text,
                           session_id uuid, seq bigint, PRIMARY KEY (space_id, xid, id));
CREATE TABLE b_positions (space_id uuid PRIMARY KEY, last bigint NOT NULL);
CREATE TABLE b_events_pos (space_id uuid, position bigint, kind text, session_id uuid,
                           seq bigint, PRIMARY KEY (space_id, position));
"""

APPEND = """
WITH s AS (UPDATE b_sessions SET last_seq = last_seq + 1 WHERE space_id = $1 AND id = $2
           RETURNING last_seq)
INSERT INTO b_records SELECT $1, $2, s.last_seq, 'benchmark record' FROM s RETURNING seq
"""
EVENT_XID = """
INSERT INTO b_events_xid (space_id, kind, session_id, seq) VALUES ($1, 'records_appended', $2, $3)
"""
EVENT_POSITION = """
WITH p AS (INSERT INTO b_positions VALUES ($1, 1)
           ON CONFLICT (space_id) DO UPDATE SET last = b_positions.last + 1 RETURNING last)
INSERT INTO b_events_pos SELECT $1, p.last, 'records_appended', $2, $3 FROM p
"""

Write = Callable[[asyncpg.Connection, uuid.UUID, uuid.UUID], Awaitable[None]]


async def no_event(con: asyncpg.Connection, space: uuid.UUID, session: uuid.UUID) -> None:
    """The append alone."""
    await con.fetchval(APPEND, space, session)


async def xid_event(con: asyncpg.Connection, space: uuid.UUID, session: uuid.UUID) -> None:
    """The append and an event stamped with the transaction id."""
    seq = await con.fetchval(APPEND, space, session)
    await con.execute(EVENT_XID, space, session, seq)


async def position_event(con: asyncpg.Connection, space: uuid.UUID, session: uuid.UUID) -> None:
    """The append and, last, an event at the space's next position."""
    seq = await con.fetchval(APPEND, space, session)
    await con.execute(EVENT_POSITION, space, session, seq)


async def load(
    pool: asyncpg.Pool, write: Write, targets: list[tuple[uuid.UUID, uuid.UUID]], seconds: float
) -> Result:
    """Every writer commits back to back on its own (space, session) for `seconds`."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def writer(space: uuid.UUID, session: uuid.UUID) -> None:
        async with pool.acquire() as con:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                async with con.transaction():
                    await write(cast(asyncpg.Connection, con), space, session)
                latencies.append((time.perf_counter() - began) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(writer(space, session) for space, session in targets))
    return Result(len(latencies), time.perf_counter() - started, latencies)


async def run(writers: int, seconds: float, rounds: int) -> None:
    """Create the scratch tables, measure every scenario `rounds` times, print the table."""
    folder = Path(tempfile.mkdtemp(prefix="stello-bench-pg-"))
    with embedded_server(folder / "data", delete=True) as admin_dsn:
        dsn = await ensure_database(admin_dsn, "stello_bench_cursor")
        async with asyncpg.create_pool(dsn, min_size=writers, max_size=writers) as pool:
            await pool.execute(SCHEMA)
            one_space = uuid.uuid4()
            shared = [(one_space, uuid.uuid4()) for _ in range(writers)]
            apart = [(uuid.uuid4(), uuid.uuid4()) for _ in range(writers)]
            await pool.executemany("INSERT INTO b_sessions VALUES ($1, $2)", shared + apart)
            scenarios: list[tuple[str, Write, list[tuple[uuid.UUID, uuid.UUID]]]] = [
                ("no event", no_event, shared),
                ("xid horizon", xid_event, shared),
                ("space position", position_event, shared),
                (f"space position, {writers} spaces", position_event, apart),
            ]
            samples: dict[str, list[Result]] = {}
            for round_index in range(rounds):
                order = scenarios if round_index % 2 == 0 else list(reversed(scenarios))
                for name, write, targets in order:
                    result = await load(pool, write, targets, seconds)
                    samples.setdefault(name, []).append(result)
                    print(f"  round {round_index + 1} {name:26} {result.rps:7.0f} tx/s", flush=True)
    print()
    print(f"{writers} writers, one session each; durable commits; median of {rounds} rounds")
    print(f"{'scenario':28} {'tx/s':>7} {'/no event':>9} {'p50 ms':>7} {'p99 ms':>7}")
    floor = sorted(samples["no event"], key=lambda r: r.rps)[rounds // 2].rps
    for name, _, _ in scenarios:
        got = sorted(samples[name], key=lambda r: r.rps)[rounds // 2]
        print(
            f"{name:28} {got.rps:>7.0f} {got.rps / floor:>9.0%} "
            f"{got.quantile(0.5):>7.2f} {got.quantile(0.99):>7.2f}"
        )
    print(f"(cpus: {os.cpu_count()}; the client and PostgreSQL share them)")


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="median of this many")
    args = parser.parse_args()
    run_main(run(args.writers, args.seconds, args.rounds))


if __name__ == "__main__":
    main()
