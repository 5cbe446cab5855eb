"""Search reads "ё" as its plain letter and leaves out the Arabic and Hebrew vowel marks
(migration 0048): "елка" finds "ёлка" and "Ёлка" and the reverse (Russian is mostly
written without the diaeresis), "كتب" finds the vocalised "كَتَبَ" and the reverse, "שלום"
finds "שָׁלוֹם", in records, labels and metadata values, and a hit is marked on the word as it
is written."""

from __future__ import annotations

import unicodedata
import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.search.highlight import snippet, terms
from storage_service.search.query import normalise, parse_query
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search, session_ids, tag
from tests.storage.search.test_search_tags import labels
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "Ёлка в лесу",  # 1
    "зелёная ёлка",  # 2
    "ЕЛКА И ЕЖИК",  # 3
    "كَتَبَ الوَلَدُ الدَّرْسَ",  # 4: fatha, damma, shadda, sukun
    "كتب الولد الدرس",  # 5
    "שָׁלוֹם עוֹלָם",  # 6: niqqud, the shin dot
    "שלום עולם",  # 7
)

# Unicode's nonspacing marks (Mn) of the Hebrew block and the Arabic harakat (U+064B-U+065F,
# the superscript alef U+0670); Hebrew's U+05BE, U+05C0, U+05C3 and U+05C6 are punctuation.
HEBREW_MARKS = "".join(chr(p) for p in range(0x591, 0x5C8) if unicodedata.category(chr(p)) == "Mn")
ARABIC_MARKS = "".join(chr(p) for p in range(0x64B, 0x660)) + "\u0670"


@pytest.fixture(name="written")
async def _written(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Scripts")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            pytest.param("елка", {1, 2, 3}, id="ie-finds-yo"),
            pytest.param("ёлка", {1, 2, 3}, id="yo-finds-ie"),
            pytest.param("ЁЛКА", {1, 2, 3}, id="capital-yo"),
            pytest.param("зеленая", {2}, id="yo-inside-a-word"),
            pytest.param("ёжик", {3}, id="yo-finds-capital-ie"),
            pytest.param("ёл*", {1, 2, 3}, id="prefix"),
            pytest.param("كتب", {4, 5}, id="plain-arabic-finds-vocalised"),
            pytest.param("كَتَبَ", {4, 5}, id="vocalised-arabic-finds-plain"),
            pytest.param("الدرس", {4, 5}, id="shadda-and-sukun"),
            pytest.param('"كتب الولد"', {4, 5}, id="arabic-phrase"),
            pytest.param("שלום", {6, 7}, id="plain-hebrew-finds-pointed"),
            pytest.param("שָׁלוֹם", {6, 7}, id="pointed-hebrew-finds-plain"),
        ],
    )
    async def test_found_with_or_without_the_marks(
        self, stub: Stub, space: TestSpace, written: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """A word is found whether the record or the query writes "ёлка" or "елка", the
        vowel marks or none."""
        assert found(await search(stub, space, query)) == {(str(written), s) for s in seqs}

    @pytest.mark.parametrize(
        ("query", "seq", "words"),
        [
            pytest.param("елка", 1, ["Ёлка"], id="yo"),
            pytest.param("зеленая елка", 2, ["зелёная", "ёлка"], id="yo-inside"),
            pytest.param("كتب", 4, ["كَتَبَ"], id="arabic"),
            pytest.param("الدرس", 4, ["الدَّرْسَ"], id="arabic-shadda"),
            pytest.param("שלום", 6, ["שָׁלוֹם"], id="hebrew"),
        ],
    )
    async def test_the_written_word_is_marked(
        self,
        stub: Stub,
        space: TestSpace,
        written: uuid.UUID,
        query: str,
        seq: int,
        words: list[str],
    ) -> None:
        """The highlight marks the word as the record writes it, its marks included."""
        hits = {hit.seq: hit for hit in await search(stub, space, query)}
        assert marked(hits[seq]) == words


class TestLabelsAndValues:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("Ёжик в тумане", "ежик", id="yo-label"),
            pytest.param("ежик в тумане", "Ёжик", id="yo-query"),
            pytest.param("مَكْتَبَة المدينة", "مكتبة", id="arabic-label"),
            pytest.param("مكتبة المدينة", "مَكْتَبَة", id="arabic-query"),
            pytest.param("סֵפֶר חָדָשׁ", "ספר", id="hebrew-label"),
        ],
    )
    async def test_a_label_is_found_with_or_without_the_marks(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions reads a label's "ё" and vowel marks as the query's."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]

    async def test_a_metadata_value_is_found_with_or_without_the_marks(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A metadata value's "ё" and vowel marks read as the query's."""
        russian, arabic = await make_session(), await make_session()
        await tag(pool, space.id, russian, city="Орёл")
        await tag(pool, space.id, arabic, city="القَاهِرَة")
        assert await session_ids(stub, space, "орел") == [str(russian)]
        assert await session_ids(stub, space, "القاهرة") == [str(arabic)]


async def test_the_database_reads_the_marks_as_the_query_does(pool: asyncpg.Pool) -> None:
    """`stello_search_text` and `normalise` read "ё", "Ё" and every vowel mark alike: alone,
    inside words and between other scripts' words."""
    chars = "ёЁ" + HEBREW_MARKS + ARABIC_MARKS
    text = "".join(f"ب{c}ש " for c in chars) + chars + "\nЁЛКА ёлка\n\nשָׁלוֹם كَتَبَ\u05be\u05c3 ok\n"
    database = await pool.fetchval("SELECT stello_search_text($1)", text)
    assert database == normalise(text)
    assert not set(database) & set(chars)  # none left
    assert "\u05be" in database and "\u05c3" in database  # Hebrew punctuation stays


def test_the_query_reads_yo_as_ie_and_leaves_the_marks_out() -> None:
    """The query reads "ё" and "Ё" as U+0435 ("ёж" is "еж") and leaves the vowel marks out,
    as the database does."""
    assert normalise("Ёлка ёж") == "елка еж"
    assert parse_query("ЁЛКА").text == parse_query("елка").text
    assert parse_query("كَتَبَ שָׁלוֹם").text == parse_query("كتب שלום").text
    assert normalise(HEBREW_MARKS + ARABIC_MARKS) == ""


@pytest.mark.parametrize(
    ("content", "lexemes", "words"),
    [
        ("Ёлка, ёлка и елка", "'елка'", ["Ёлка", "ёлка", "елка"]),
        ("كَتَبَ و كتب", "'كتب'", ["كَتَبَ", "كتب"]),
        ("שָׁלוֹם, שלום", "'שלום'", ["שָׁלוֹם", "שלום"]),
    ],
)
def test_a_word_is_marked_as_written(content: str, lexemes: str, words: list[str]) -> None:
    """The highlighter marks the written word, "ё" and marks included, for the plain lexeme."""
    text, start, spans = snippet(content, *terms(lexemes))
    assert (text, start) == (content, 0)
    assert [content[s:e] for s, e in spans] == words
