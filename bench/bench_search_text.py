"""`stello_search_text` on long texts (migrations 0044, 0045, 0048, 0049): 0044's and 0048's
functions against the current one (labelled "current": 0049's, which runs 0045's and then
folds "ё" and removes the Hebrew and Arabic vowel marks, the tatweel and the Quranic marks
of a text holding one: 0048's step with a larger character class, so on a text holding none
of these it should cost what 0048's does).

0042's function (kept by 0043) ran `translate` over each line holding a Latin letter with
diacritics; a character in none of its list walks the whole list, so one long line of
another script holding a single "é" cost its length times the list (1 MiB: about 4 s).
0044's translates only the runs of those letters. 0045's also lowercases every letter past
ASCII (letters.py `LOWER`), translating the runs of capitals only. This times the three
(0044's and 0048's loaded from their migrations under pg_temp names) on texts of about
1 MiB, the fewest seconds of five calls (the versions called in turn), and checks that the
current one makes the text the query's `normalise` does (and whether 0044's and 0048's made
the same).

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
ARABIC = "ابتثجحخدذرزسشصضطظعغفقكلمنهوي"
REPEATS = 5
FUNCTIONS = {
    "0044": "pg_temp.old_text($1)",
    "0048": "pg_temp.text_0048($1)",
    "current": "public.stello_search_text($1)",
}


def old_functions() -> list[str]:
    """0044's `stello_search_text` as pg_temp.old_text, 0048's as pg_temp.text_0048."""
    return [
        migration_function("0044_search_text_pieces.sql", "stello_search_text", "pg_temp.old_text"),
        migration_function(
            "0048_search_yo_and_vowel_marks.sql", "stello_search_text", "pg_temp.text_0048"
        ),
    ]


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
        "1 MiB of plain Arabic, one line": words(rng, ARABIC, MIB // 2),
        "1 MiB of Arabic, one é": words(rng, ARABIC, MIB // 2) + " é",
        "1 MiB of Arabic with harakat": words(rng, ARABIC + "\u064e\u0650\u064f", MIB // 2),
        "1 MiB of Arabic with tatweel": words(rng, ARABIC + "\u0640", MIB // 2),
    }


async def main() -> None:
    async with database() as dsn:
        con = await asyncpg.connect(dsn)
        try:
            for function in old_functions():
                await con.execute(function)
            for name, text in texts().items():
                made = {}
                best = dict.fromkeys(FUNCTIONS, float("inf"))
                for _ in range(REPEATS):  # the versions in turn: a busy moment hits each
                    for version, call in FUNCTIONS.items():
                        began = time.perf_counter()
                        made[version] = await con.fetchval(f"SELECT {call}", text)
                        best[version] = min(best[version], time.perf_counter() - began)
                line = f"{name:42s}" + "".join(f" {v}: {t:6.3f} s" for v, t in best.items())
                right = made["current"] == normalise(text)
                same = [v for v in ("0044", "0048") if made[v] == made["current"]]
                print(
                    f"{line}  {'as the query' if right else 'NOT AS THE QUERY'}"
                    f"{''.join(f', {v} the same' for v in same)}",
                    flush=True,
                )
        finally:
            await con.close()


if __name__ == "__main__":
    run_main(main())
