"""A text of ASCII characters only gets its search vector without the passes that cannot
change it (migration 0046), and the same vector as through them.

`stello_search_vector` (records) and `stello_label_vector` (labels, metadata values) read
every text through `stello_search_text`, the CJK bigrams and the symbols' terms; for an
ASCII text only the punctuation's replacement changes anything. The tests compare the
functions with the passes' own expression (0043's bodies, which 0046 keeps for any other
text) over random ASCII texts, and count the calls of the passes in the transaction
(`pg_stat_xact_user_functions`), not time."""

from __future__ import annotations

import random

import asyncpg
import pytest

pytestmark = pytest.mark.sql

# 0043's bodies: what every text's vector was made of before 0046.
_PASSES = (
    "to_tsvector('{config}'::regconfig, regexp_replace(s.searched, '[\\u3040-\\u30ff\\u3400-\\u4dbf"
    "\\u4e00-\\u9fff\\uac00-\\ud7af\\uf900-\\ufaff\\uff66-\\uff9f\\U00020000-\\U0002fa1f\\u00a2-\\u00a7"
    "\\u00a9\\u00ac\\u00ae\\u00b0-\\u00b1\\u00b6\\u00d7\\u00f7\\u203c\\u2049\\u20a0-\\u20cf\\u2122"
    "\\u2190-\\u2bff\\U0001f000-\\U0001faff]+', ' ', 'g'))"
    " || to_tsvector('{config}'::regconfig, stello_search_grams(s.searched))"
    " || to_tsvector('{config}'::regconfig, stello_search_symbols(s.searched))"
)
DIFFERENT = f"""
SELECT t.text
FROM unnest($1::text[]) AS t (text)
CROSS JOIN LATERAL (SELECT stello_search_text(t.text) OFFSET 0) AS s (searched)
WHERE stello_search_vector(t.text) IS DISTINCT FROM ({_PASSES.format(config="english")})
   OR stello_label_vector(t.text) IS DISTINCT FROM ({_PASSES.format(config="simple")})
"""

# Every ASCII character but NUL (which no text holds), the punctuation and the spaces
# often, so that words, numbers and separators mix as in prose, code and identifiers.
_CHARS = "".join(chr(c) for c in range(1, 128)) + " .,-_'\"<>/:;()" * 4 + "ab1 " * 8
_SAMPLES = [
    "",
    " ",
    "Hello, world.",
    "JIRA-4411 v1.2.3 example.com user@example.com",
    "<b>bold</b> &amp; a < b > c",
    "don't stop: the quick brown foxes jumped over the lazy dogs",
    "C++ C# $100 50% a+b=c #tag @name ~home `code` [x] {y} |z| \\n",
    "\t tab\nnew line\r\x01\x1f\x7f",
]


def random_texts(count: int, seed: int) -> list[str]:
    """`count` random ASCII texts of up to 200 characters, and the samples."""
    rng = random.Random(seed)
    texts = ["".join(rng.choices(_CHARS, k=rng.randint(0, 200))) for _ in range(count)]
    return _SAMPLES + texts


async def test_an_ascii_texts_vectors_are_the_passes_vectors(pool: asyncpg.Pool) -> None:
    """Records' and labels' vectors of 800 random ASCII texts are what the passes make of
    them, lexemes and positions alike."""
    assert await pool.fetch(DIFFERENT, random_texts(800, seed=46)) == []


async def test_other_texts_vectors_are_the_passes_vectors(pool: asyncpg.Pool) -> None:
    """A text with one character past ASCII takes the passes, as before."""
    texts = [t + tail for t in random_texts(50, seed=47) for tail in ("é", "ПРИВЕТ", "🚀", "漢字")]
    assert await pool.fetch(DIFFERENT, texts) == []


PASS_CALLS = """
SELECT coalesce(sum(calls), 0)
FROM pg_stat_xact_user_functions
WHERE funcname IN ('stello_search_text', 'stello_search_grams', 'stello_search_symbols')
"""


async def pass_calls(pool: asyncpg.Pool, vector: str, texts: list[str]) -> int:
    """The calls of the passes while `vector` is made of each of `texts`: the difference of
    two counts in one transaction (the view adds the counts its connection has not yet
    reported, of earlier transactions too; none is reported inside a transaction)."""
    async with pool.acquire() as con, con.transaction():
        await con.execute("SET LOCAL track_functions = 'all'")
        before = int(await con.fetchval(PASS_CALLS))
        await con.execute(f"SELECT {vector}(t) FROM unnest($1::text[]) AS t", texts)
        return int(await con.fetchval(PASS_CALLS)) - before


@pytest.mark.parametrize("vector", ["stello_search_vector", "stello_label_vector"])
async def test_an_ascii_text_calls_no_pass(pool: asyncpg.Pool, vector: str) -> None:
    """100 ASCII texts: no call of a pass (before 0046: three per text); 100 texts with a
    letter past ASCII: the passes run for each."""
    texts = random_texts(100, seed=48)
    assert await pass_calls(pool, vector, texts) == 0
    assert await pass_calls(pool, vector, [t + "é" for t in texts]) >= 3 * len(texts)
