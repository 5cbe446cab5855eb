"""The search vectors of labels and records (migration 0046): 0043's functions against the
current ones, on short texts of ASCII only and with one letter past it.

0043's `stello_label_vector` is a SQL function whose body reads a subquery: never inlined,
and before PostgreSQL 18 each call planned its passes' bodies again. 0046 makes it PL/pgSQL,
and both it and `stello_search_vector` give an ASCII text its vector without the passes that
cannot change it. This times 5,000 calls of each (0043's loaded from its migration under
pg_temp names), the fewer seconds of two runs, and checks that both make the same vectors.

    python bench/bench_search_vectors.py

Uses STELLO_BENCH_DATABASE_URL when set (e.g. the machine's PostgreSQL 15), else starts the
embedded PostgreSQL in a temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, migration_function, run_main

CALLS = 5_000
TEXTS = {
    "label, ASCII": "'kid number ' || i",
    "label, one é": "'kid numbér ' || i",
    "record, ASCII": "'The quick brown fox jumps over the lazy dog, number ' || i || '.'",
    "record, one é": "'The quick brown fox jumps over the lazy dog, numbér ' || i || '.'",
}


def old_functions() -> list[str]:
    """0043's `stello_search_vector` and `stello_label_vector` as pg_temp functions."""
    return [
        migration_function("0043_search_symbols.sql", name, f"pg_temp.old_{name}")
        for name in ("stello_search_vector", "stello_label_vector")
    ]


async def best_of_two(con: asyncpg.Connection, query: str) -> float:
    """The fewer seconds of two runs of `query`."""
    best = float("inf")
    for _ in range(2):
        began = time.perf_counter()
        await con.execute(query)
        best = min(best, time.perf_counter() - began)
    return best


async def main() -> None:
    async with database() as dsn:
        con = await asyncpg.connect(dsn)
        try:
            for sql in old_functions():
                await con.execute(sql)
            print(f"PostgreSQL {await con.fetchval('SHOW server_version')}, {CALLS} calls each")
            for name, text in TEXTS.items():
                function = (
                    "stello_label_vector" if name.startswith("label") else ("stello_search_vector")
                )
                rows = f"FROM generate_series(1, {CALLS}) AS i"
                old = await best_of_two(con, f"SELECT pg_temp.old_{function}({text}) {rows}")
                new = await best_of_two(con, f"SELECT public.{function}({text}) {rows}")
                differ = await con.fetchval(
                    f"SELECT count(*) {rows} WHERE public.{function}({text})"
                    f" IS DISTINCT FROM pg_temp.old_{function}({text})"
                )
                print(
                    f"{name:16s} 0043: {old:7.3f} s  0046: {new:7.3f} s  {old / new:6.1f}x"
                    f"  {'same vectors' if differ == 0 else f'{differ} VECTORS DIFFER'}",
                    flush=True,
                )
        finally:
            await con.close()


if __name__ == "__main__":
    run_main(main())
