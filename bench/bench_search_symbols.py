"""Symbols in search (migration 0043): the vector function's cost and the index's size.

0043 adds each symbol's lexeme to a record's vector (`stello_search_symbols`) and reads
`stello_search_text` once per vector (0040's read it twice). This times 0042's vector (its
functions loaded from the migrations under pg_temp names) and the current one over the same
texts, in one statement each (the fewest seconds of five): plain English records, the same
with a few emoji and symbols, and one 1 MiB English record; and builds a GIN index of each
one's vectors over a corpus of records of which one in ten holds symbols, printing its size.

    python bench/bench_search_symbols.py [--rows 20000]

Uses STELLO_BENCH_DATABASE_URL when set, else starts the embedded PostgreSQL in a
temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, migration_function, run_main

WORDS = (
    "the deploy failed because the database connection was refused while running migration "
    "please check logs retry build server tests passed release notes customer session token "
    "agent tool result error timeout config value python function query index search record"
).split()
SYMBOLS = "🚀✅❌→€★⚠️👍🔥📦"


def old_functions() -> list[str]:
    """0042's `stello_search_text` and 0040's `stello_search_vector` as pg_temp functions."""
    vector = migration_function(
        "0040_search_vector_bound.sql", "stello_search_vector", "pg_temp.old_vector"
    )
    return [
        migration_function("0042_search_accents.sql", "stello_search_text", "pg_temp.old_text"),
        vector.replace("public.stello_search_text", "pg_temp.old_text"),
    ]


def record(rng: random.Random, chars: int, symbols: int) -> str:
    """Random English words, about `chars` long, with `symbols` symbols among them."""
    words: list[str] = []
    length = 0
    while length < chars:
        words.append(rng.choice(WORDS))
        length += len(words[-1]) + 1
    for _ in range(symbols):
        words.insert(rng.randrange(len(words)), rng.choice(SYMBOLS))
    return " ".join(words)


VECTORS = {"0042": "pg_temp.old_vector(t)", "0043": "public.stello_search_vector(t)"}


async def timed(con: asyncpg.Connection, vector: str, texts: list[str]) -> float:
    """Seconds of the vectors of `texts` in one statement (the fewest of five)."""
    query = f"SELECT sum(length(({vector})::text)) FROM unnest($1::text[]) AS u(t)"
    times = []
    for _ in range(5):
        began = time.perf_counter()
        await con.fetchval(query, texts)
        times.append(time.perf_counter() - began)
    return min(times)


async def sizes(con: asyncpg.Connection, vector: str, texts: list[str]) -> tuple[int, int]:
    """Bytes of a GIN index of the vectors of `texts`, and of the vectors themselves."""
    await con.execute("DROP TABLE IF EXISTS pg_temp.vectors")
    await con.execute(
        f"CREATE TEMP TABLE vectors AS SELECT {vector} AS v FROM unnest($1::text[]) AS u(t)",
        texts,
    )
    await con.execute("CREATE INDEX vectors_v ON pg_temp.vectors USING gin (v)")
    index: int = await con.fetchval("SELECT pg_relation_size('pg_temp.vectors_v')")
    stored: int = await con.fetchval("SELECT sum(pg_column_size(v)) FROM pg_temp.vectors")
    return index, stored


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    cases = {
        "2,000 plain records of 500 chars": [record(rng, 500, 0) for _ in range(2000)],
        "2,000 records of 500 chars, 3 symbols each": [record(rng, 500, 3) for _ in range(2000)],
        "one plain record of 1 MiB": [record(rng, 1 << 20, 0)],
    }
    corpus = [record(rng, 300, 2 if i % 10 == 0 else 0) for i in range(args.rows)]
    async with database() as dsn:
        con = await asyncpg.connect(dsn)
        try:
            for statement in old_functions():
                await con.execute(statement)
            for case, texts in cases.items():
                for name, vector in VECTORS.items():
                    seconds = await timed(con, vector, texts)
                    print(f"{case:44s} {name}: {seconds * 1000:8.1f} ms")
            for name, vector in VECTORS.items():
                index, stored = await sizes(con, vector, corpus)
                print(
                    f"{args.rows:,d} records (1 in 10 with symbols) {name}: GIN index "
                    f"{index / 1024:,.0f} KiB, vectors {stored / 1024:,.0f} KiB"
                )
        finally:
            await con.close()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    return parser.parse_args()


if __name__ == "__main__":
    run_main(main(parse()))
