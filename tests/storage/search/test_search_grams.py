"""A record of CJK text is written in time linear in its length (migration 0039): its
search vector's bigrams took `substr` per character, n²/2 character steps inside the
record's INSERT (60,000 characters, 180 KB: 46 s of the database's CPU). The bigrams are
the same text as 0019's, so no stored vector changes. The time is measured in
bench/bench_search_grams.py (DESIGN §9: speed is measured, not asserted in tests); here,
that the new function makes 0019's text, and that a long record is written and found."""

from __future__ import annotations

import random
import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.search.query import CJK
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, search
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

# Migration 0019's definition, the oracle.
OLD_GRAMS = f"""
CREATE FUNCTION pg_temp.old_grams(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT coalesce(string_agg(substr(r.m[1], i, 2), ' ' ORDER BY r.n, i), '')
FROM regexp_matches(content, '[{CJK}]+', 'g') WITH ORDINALITY AS r(m, n)
CROSS JOIN LATERAL generate_series(1, length(r.m[1])) AS i
$$
"""


def cjk_text(chars: int, seed: int) -> str:
    """Random CJK characters: nearly every bigram a lexeme of its own."""
    rng = random.Random(seed)
    return "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(chars))


async def test_a_long_cjk_record_is_written_and_found(
    stub: Stub, space: TestSpace, make_session: MakeSession
) -> None:
    """60,000 CJK characters (46 s of the database's CPU before 0039) are appended and
    found by four characters of their middle."""
    content = cjk_text(60_000, seed=1)
    sid = await make_session()
    await append(stub, space, sid, rec(content))
    assert found(await search(stub, space, content[100:104])) == {(str(sid), 1)}


async def test_the_grams_are_0019_s(pool: asyncpg.Pool) -> None:
    """The new bigrams are the old function's text on mixed texts: runs of every CJK
    range, runs of one character, ASCII, spaces and punctuation between them."""
    alphabet = [
        " ",
        "a",
        "Z",
        "1",
        "、",
        "。",
        "-",
        "你",
        "好",
        "タ",
        "ー",
        "한",
        "국",
        "\U00020001",
    ]
    alphabet += [chr(0x4E00 + i) for i in range(40)]
    rng = random.Random(uuid.UUID(int=3).int)
    texts = ["", "你", "你好世界", "東京タワー x 한국어、中"]
    texts += ["".join(rng.choices(alphabet, k=rng.choice([3, 30, 300]))) for _ in range(200)]
    async with pool.acquire() as con:
        await con.execute(OLD_GRAMS)
        for text in texts:
            row = await con.fetchrow(
                "SELECT stello_search_grams($1) AS new, pg_temp.old_grams($1) AS old", text
            )
            assert row is not None and row["new"] == row["old"], text
