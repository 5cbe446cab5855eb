"""`stello_search_text` on long texts (migrations 0044, 0045, 0048): 0044's function against
the current one (labelled "current": 0048's, which runs 0045's and then folds "ё" and the
Hebrew and Arabic vowel marks of a text holding one).

0042's function (kept by 0043) ran `translate` over each line holding a Latin letter with
diacritics; a character in none of its list walks the whole list, so one long line of
another script holding a single "é" cost its length times the list (1 MiB: about 4 s).
0044's translates only the runs of those letters. 0045's also lowercases every letter past
ASCII (letters.py `LOWER`), translating the runs of capitals only. This times both (0044's
loaded from its migration under a pg_temp name) on texts of about 1 MiB, the fewer seconds
of two calls, and checks that the current one makes the text the query's `normalise` does
(and whether 0044's made the same).

    python bench/bench_search_text.py

Uses STELLO_BENCH_DATABASE_URL when set, else starts the embedded PostgreSQL in a
temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, migration_function, run_main

from storage_service.search.query import normalise

MIB = 1 << 20
CYRILLIC = "абвгдежзийклмнопрстуфхцчшщыэюя"
FRENCH = "abcdefghijklmnopqrstuvwxyzéèàçê"
VIETNAMESE = "abcdeghiklmnopqrstuvxyạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựđơư"
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
FUNCTIONS = {"0044": "pg_temp.old_text($1)", "current": "public.stello_search_text($1)"}


def old_function() -> str:
    """0044's `stello_search_text` as pg_temp.old_text."""
    return migration_function(
        "0044_search_text_pieces.sql", "stello_search_text", "pg_temp.old_text"
    )


def words(rng: random.Random, letters: str, chars: int) -> str:
    """Random words of `letters`, `chars` long, on one line."""
    out: list[str] = []
    length = 0
    while length < chars:
        out.append("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
        length += len(out[-1]) + 1
    return " ".join(out)[:chars]


def texts() -> dict[str, str]:
    rng = random.Random(3)
    cjk = "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(MIB // 3))
    return {
        "1 MiB of ASCII words": words(rng, "abcdefghijklmnopqrstuvwxyz", MIB),
        "1 MiB of French words, one line": words(rng, FRENCH, MIB),
        "1 MiB of Vietnamese words, one line": words(rng, VIETNAMESE, MIB),
        "1 MiB of Russian lines, one é": "\n".join(
            words(rng, CYRILLIC, 80) for _ in range(MIB // 81)
        )
        + " é",
        "one line of 512 Ki Cyrillic chars, one é": words(rng, CYRILLIC, MIB // 2) + " é",
        "one line of 341 Ki CJK chars, one é": cjk + "é",
        "1 MiB of Russian sentences, capitalised": " ".join(
            w.capitalize() if i % 8 == 0 else w
            for i, w in enumerate(words(rng, CYRILLIC, MIB // 2).split())
        ),
        "1 MiB of Russian capitals, one line": words(rng, CYRILLIC, MIB // 2).upper(),
        "1 MiB of Greek capitals, one line": words(rng, GREEK, MIB // 2).upper(),
        "1 MiB of English sentences, capitalised": " ".join(
            w.capitalize() if i % 8 == 0 else w
            for i, w in enumerate(words(rng, "abcdefghijklmnopqrstuvwxyz", MIB).split())
        ),
    }


async def main() -> None:
    async with database() as dsn:
        con = await asyncpg.connect(dsn)
        try:
            await con.execute(old_function())
            for name, text in texts().items():
                made = {}
                line = f"{name:44s}"
                for version, call in FUNCTIONS.items():
                    best = float("inf")
                    for _ in range(2):
                        began = time.perf_counter()
                        made[version] = await con.fetchval(f"SELECT {call}", text)
                        best = min(best, time.perf_counter() - began)
                    line += f" {version}: {best:6.3f} s"
                right = made["current"] == normalise(text)
                same = made["0044"] == made["current"]
                print(
                    f"{line}  {'as the query' if right else 'NOT AS THE QUERY'}"
                    f"{', 0044 the same' if same else ''}",
                    flush=True,
                )
        finally:
            await con.close()


if __name__ == "__main__":
    run_main(main())
