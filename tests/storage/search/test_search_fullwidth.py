"""Full-width letters, digits and punctuation read as their ASCII forms, and the ideographic
space as a space, in what is searched and in the query (migration 0041): "API", "FOX" and
"123" in full width, as Japanese and Chinese input methods type them, find "API", "fox" and
"123", and the reverse, and a hit in full-width text is marked at its own offsets in the
original text. They found nothing: the parser read full-width "API" as a word of full-width
letters, which no ASCII query is."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.search.highlight import snippet, terms
from storage_service.search.query import parse_query
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search, session_ids, tag
from tests.storage.search.test_search_tags import labels
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "the ＡＰＩ gateway answers ＪＩＲＡ－４４１１",
    "a quick brown fox in ASCII with ticket 123",
    "全角の　ｆｏｘ　です",
)


@pytest.fixture(name="wide")
async def _wide(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Wide")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            pytest.param("api", {1}, id="ascii-finds-full-width"),
            pytest.param("ＡＰＩ", {1}, id="full-width-finds-full-width"),
            pytest.param("4411", {1}, id="full-width-digits-and-punctuation"),
            pytest.param("JIRA-4411", {1}, id="ascii-ticket-finds-full-width"),
            pytest.param("ＦＯＸ", {2, 3}, id="full-width-finds-ascii"),
            pytest.param("１２３", {2}, id="full-width-digits-find-ascii"),
            pytest.param("fox　です", {3}, id="ideographic-space"),
        ],
    )
    async def test_found_either_way(
        self, stub: Stub, space: TestSpace, wide: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """A full-width word is found by its ASCII form and an ASCII word by its full-width
        form: both are read as ASCII."""
        assert found(await search(stub, space, query)) == {(str(wide), s) for s in seqs}

    @pytest.mark.parametrize(
        ("query", "words"),
        [
            pytest.param("api", ["ＡＰＩ"], id="one-word"),
            pytest.param("JIRA-4411", ["ＪＩＲＡ", "４４１１"], id="words-at-punctuation"),
        ],
    )
    async def test_the_full_width_words_are_marked(
        self, stub: Stub, space: TestSpace, wide: uuid.UUID, query: str, words: list[str]
    ) -> None:
        """The highlight marks the full-width words themselves, at their offsets in the
        original text."""
        hits = await search(stub, space, query)
        assert marked(hits[0]) == words


class TestLabelsAndValues:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("ＡＰＩ rollout", "api", id="full-width-label"),
            pytest.param("API rollout", "ＡＰＩ", id="full-width-query"),
            pytest.param("ｖ２．０ release", "v2", id="full-width-version"),
        ],
    )
    async def test_a_label_is_found_either_way(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions reads a label's full-width words as ASCII, as the query's."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]

    async def test_a_metadata_value_is_found_either_way(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A metadata value's full-width words are read as ASCII (its vector reads the
        labels' normalisation)."""
        wide, plain = await make_session(), await make_session()
        await tag(pool, space.id, wide, team="ＦＯＸ－１２３")
        await tag(pool, space.id, plain, team="fox-456")
        assert await session_ids(stub, space, "fox123") == []
        assert set(await session_ids(stub, space, "fox")) == {str(wide), str(plain)}
        assert await session_ids(stub, space, "１２３") == [str(wide)]
        assert await session_ids(stub, space, "４５６") == [str(plain)]


async def test_the_database_reads_full_width_as_ascii(pool: asyncpg.Pool) -> None:
    """`stello_search_text` reads each of U+FF01-U+FF5E as the ASCII character 0xFEE0 below
    it and U+3000 as a space, one character for one; the half-width katakana stay."""
    wide = "".join(f"a{chr(p + 0xFEE0)}b " for p in range(0x21, 0x7F)) + "x\u3000yｶﾅ"
    plain = "".join(f"a{chr(p)}b " for p in range(0x21, 0x7F)) + "x yｶﾅ"
    fetch = "SELECT stello_search_text($1)"
    assert await pool.fetchval(fetch, wide) == await pool.fetchval(fetch, plain)


def test_the_query_reads_full_width_as_ascii() -> None:
    """The query maps the full-width forms as the database does: full-width "API-key" is the words
    'api' and 'key', and a full-width quote is a phrase's."""
    assert parse_query("ＡＰＩ－ｋｅｙ").text == parse_query("API-key").text
    assert parse_query("＂ａ ｂ＂").text == parse_query('"a b"').text


@pytest.mark.parametrize(
    "content",
    [
        "ﬁx the ＡＰＩ now",  # a ligature NFKC would make two characters, before the word
        "㍿ ＡＰＩ",  # one NFKC makes four
        "İstanbul ＡＰＩ",  # a character whose lowercase is two (read as `I` since 0042)
    ],
)
def test_a_full_width_word_is_marked_at_its_offset_in_the_original(content: str) -> None:
    """The highlighter finds full-width "API" for the lexeme 'api' and marks it where it is in the
    original text (in its code points, as every mark), whatever precedes it."""
    text, start, spans = snippet(content, *terms("'api'"))
    assert (text, start) == (content, 0)
    assert [content[s:e] for s, e in spans] == ["ＡＰＩ"]
