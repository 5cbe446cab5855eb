"""A record of up to the record limit (1 MiB) is stored whatever its words (migration 0040):
its search vector is bounded to what PostgreSQL's tsvector holds (1 MB). A record of many
distinct words (random ids, hashes, CJK text, whose bigrams are each a lexeme) made a
vector over that limit, and its write failed with INTERNAL: the ImportSession, the turn or
the tool result holding it was lost."""

from __future__ import annotations

import random
import string
import uuid

import pytest

from stello.storage.v1 import storage_pb2_grpc
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, search
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


def distinct_words(count: int, seed: int) -> list[str]:
    """`count` random seven-letter words (about as many distinct lexemes)."""
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(count)]


def cjk_text(chars: int, seed: int) -> str:
    """Random CJK characters: nearly every bigram a lexeme of its own."""
    rng = random.Random(seed)
    return "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(chars))


async def test_a_record_of_distinct_words_is_stored_and_found_by_its_start(
    stub: Stub, space: TestSpace, make_session: MakeSession
) -> None:
    """1 MB of distinct words is appended (not INTERNAL) and found by its first words."""
    words = distinct_words(125_000, seed=1)
    content = " ".join(words)[:1_000_000]
    sid = await make_session()
    await append(stub, space, sid, rec(content))
    assert found(await search(stub, space, words[0])) == {(str(sid), 1)}


async def test_cjk_text_is_stored_and_found_by_its_start(
    stub: Stub, space: TestSpace, make_session: MakeSession
) -> None:
    """300,000 random CJK characters (900 KB) are appended and found by their start."""
    content = cjk_text(300_000, seed=2)
    sid = await make_session()
    await append(stub, space, sid, rec(content))
    assert found(await search(stub, space, content[:4])) == {(str(sid), 1)}


async def test_a_large_record_that_fits_is_found_by_its_last_word(
    stub: Stub, space: TestSpace, make_session: MakeSession
) -> None:
    """A large record whose vector fits (repeated words) is indexed whole: its last word
    is found."""
    content = "status ok " * 90_000 + str(uuid.UUID(int=7)).replace("-", "") + " lastword"
    sid = await make_session()
    await append(stub, space, sid, rec(content))
    assert found(await search(stub, space, "lastword")) == {(str(sid), 1)}
