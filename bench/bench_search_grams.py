"""The search vector of a long CJK record (migrations 0039, 0040): its cost per character.

A record's `search_vector` is a stored generated column, computed inside the record's
INSERT: `stello_search_vector` (migration 0040) over the CJK bigrams of
`stello_search_grams` (0039). 0019's bigrams took a `substr` per character from the run's
start, n²/2 character steps (60,000 characters: 46 s of the database's CPU); 0039's take
each character once. This prints the time of `stello_search_vector` and of
`stello_search_grams` on random CJK texts of growing length, each against the shortest
measured in the same run: linear work reads about the length's ratio (4x, 16x), quadratic
work its square. With --old, 0019's function is timed too (slow: keep --max-chars small).

    python bench/bench_search_grams.py [--max-chars 160000] [--old]

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

from harness import database, run_main

from storage_service.search.query import CJK

OLD_GRAMS = f"""
CREATE FUNCTION pg_temp.old_grams(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT coalesce(string_agg(substr(r.m[1], i, 2), ' ' ORDER BY r.n, i), '')
FROM regexp_matches(content, '[{CJK}]+', 'g') WITH ORDINALITY AS r(m, n)
CROSS JOIN LATERAL generate_series(1, length(r.m[1])) AS i
$$
"""
"""Migration 0019's bigrams, the baseline of --old."""

FUNCTIONS = {
    "stello_search_vector": "SELECT length(stello_search_vector($1)::text)",
    "stello_search_grams": "SELECT length(stello_search_grams($1))",
}


def cjk_text(chars: int, seed: int) -> str:
    """Random CJK characters: nearly every bigram a lexeme of its own."""
    rng = random.Random(seed)
    return "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(chars))


async def timed(con: asyncpg.Connection, query: str, text: str) -> float:
    """Seconds of one call of `query` on `text` (the fewest of three)."""
    times = []
    for _ in range(3):
        began = time.perf_counter()
        await con.fetchval(query, text)
        times.append(time.perf_counter() - began)
    return min(times)


async def main(args: argparse.Namespace) -> None:
    sizes: list[int] = []
    size = args.max_chars
    while size >= 2_500:
        sizes.insert(0, size)
        size //= 4
    functions = dict(FUNCTIONS)
    if args.old:
        functions["0019 grams (old)"] = "SELECT length(pg_temp.old_grams($1))"
    async with database() as dsn:
        con = await asyncpg.connect(dsn)
        try:
            await con.execute(OLD_GRAMS)
            for name, query in functions.items():
                base = None
                for chars in sizes:
                    seconds = await timed(con, query, cjk_text(chars, seed=chars))
                    base = base or seconds
                    print(
                        f"{name:24s} {chars:>8,d} chars  {seconds * 1000:9.1f} ms  "
                        f"{seconds / base:6.1f}x the {sizes[0]:,d}-character text "
                        f"(length ratio {chars / sizes[0]:.0f}x)"
                    )
        finally:
            await con.close()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--max-chars", type=int, default=160_000)
    parser.add_argument("--old", action="store_true", help="time 0019's function too")
    return parser.parse_args()


if __name__ == "__main__":
    run_main(main(parse()))
