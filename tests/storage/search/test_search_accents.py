"""Latin letters with diacritics read as their base letters, and the combining diacritical marks
removed, in what is searched and in the query (migration 0042): "cafe" finds "café", "Café",
"CAFÉ" and "cafe" with U+0301, and "café" finds "cafe"; "Lodz" finds "Łódź", "Sao Paulo" finds
"São Paulo". A hit is marked on the accented word itself, at its offsets in the original
text. They found nothing: the parser read "café" as the word 'café', which no "cafe" is."""

from __future__ import annotations

import unicodedata
import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.search.highlight import snippet, terms
from storage_service.search.letters import BASES, LETTERS, STROKED, STROKED_BASES
from storage_service.search.query import normalise, parse_query
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search, session_ids, tag
from tests.storage.search.test_search_tags import labels
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "Le café est fermé le lundi",  # 1
    "a plain cafe in ASCII",  # 2
    "CAFÉ NOIR",  # 3
    "un cafe\u0301 de\u0301compose\u0301",  # 4: "e" and a combining acute accent
    "a naïve Müller sent his résumé",  # 5
    "from São Paulo to Ålesund",  # 6
    "Łódź w Polsce, Hà Nội, București",  # 7
    "naive Muller resume Sao Paulo Alesund Lodz Ha Noi Bucuresti",  # 8
)


@pytest.fixture(name="accented")
async def _accented(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Accents")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            pytest.param("cafe", {1, 2, 3, 4}, id="plain-finds-accented"),
            pytest.param("café", {1, 2, 3, 4}, id="accented-finds-plain"),
            pytest.param("CAFÉ", {1, 2, 3, 4}, id="upper-case"),
            pytest.param("cafe\u0301", {1, 2, 3, 4}, id="combining-mark-query"),
            pytest.param("decompose", {4}, id="combining-marks-in-the-record"),
            pytest.param("naive", {5, 8}, id="diaeresis"),
            pytest.param("Müller", {5, 8}, id="umlaut-query"),
            pytest.param("resume", {5, 8}, id="acute"),
            pytest.param('"Sao Paulo"', {6, 8}, id="tilde-phrase"),
            pytest.param("alesund", {6, 8}, id="ring"),
            pytest.param("Lodz", {7, 8}, id="stroke-and-acute"),
            pytest.param("Łódź", {7, 8}, id="polish-query"),
            pytest.param('"Ha Noi"', {7, 8}, id="vietnamese"),
            pytest.param("bucuresti", {7, 8}, id="romanian-comma-below"),
            pytest.param("ferm*", {1}, id="prefix"),
        ],
    )
    async def test_found_either_way(
        self, stub: Stub, space: TestSpace, accented: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """An accented word is found by its plain form and a plain word by its accented form:
        both read as the base letters."""
        assert found(await search(stub, space, query)) == {(str(accented), s) for s in seqs}

    @pytest.mark.parametrize(
        ("query", "seq", "words"),
        [
            pytest.param("cafe", 1, ["café"], id="one-word"),
            pytest.param("cafe", 3, ["CAFÉ"], id="upper-case"),
            pytest.param("cafe", 4, ["cafe\u0301"], id="with-its-combining-mark"),
            pytest.param("Lodz Bucuresti", 7, ["Łódź", "București"], id="two-words"),
            pytest.param("muller resume", 5, ["Müller", "résumé"], id="after-other-accents"),
        ],
    )
    async def test_the_accented_words_are_marked(
        self,
        stub: Stub,
        space: TestSpace,
        accented: uuid.UUID,
        query: str,
        seq: int,
        words: list[str],
    ) -> None:
        """The highlight marks the accented words themselves, at their offsets in the original
        text."""
        hits = {hit.seq: hit for hit in await search(stub, space, query)}
        assert marked(hits[seq]) == words


class TestLabelsAndValues:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("Café rollout", "cafe", id="accented-label"),
            pytest.param("Cafe rollout", "café", id="accented-query"),
            pytest.param("Trip to Łódź", "lodz", id="polish-label"),
            pytest.param("re\u0301sume\u0301 review", "resume", id="combining-marks"),
        ],
    )
    async def test_a_label_is_found_either_way(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions reads a label's accented words as their base letters, as the
        query's."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]

    async def test_a_metadata_value_is_found_either_way(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A metadata value's accented words read as their base letters (its vector reads the
        labels' normalisation)."""
        accented, plain = await make_session(), await make_session()
        await tag(pool, space.id, accented, city="São Paulo")
        await tag(pool, space.id, plain, city="Sao Tome")
        assert set(await session_ids(stub, space, "sao")) == {str(accented), str(plain)}
        assert await session_ids(stub, space, "São Paulo") == [str(accented)]
        assert await session_ids(stub, space, "tomé") == [str(plain)]


def _blocks() -> str:
    """Every character of the blocks the letters come from, and the combining marks."""
    points = [*range(0xA0, 0x250), *range(0x1E00, 0x1F00), *range(0x300, 0x370)]
    return "".join(chr(p) for p in points)


async def test_the_database_reads_letters_as_the_query_does(pool: asyncpg.Pool) -> None:
    """`stello_search_text` and `normalise` read every character of Latin-1 Supplement, Latin
    Extended-A, -B, Additional and the combining marks alike: one source (letters.py) for the
    migration's `translate` and the query's; the lines with none and the empty lines between
    them stay as they were (the database maps the lines that hold a letter)."""
    text = "".join(f"a{c}b " for c in _blocks()) + "".join(f"{c}\u0301" for c in LETTERS)
    text += "\n\nplain ASCII text\nand wide ＡＰＩ\u3000too. \n\u0444\u00e9\n" + LETTERS + "\n"
    database = await pool.fetchval("SELECT stello_search_text($1)", text)
    assert database == normalise(text).translate(str.maketrans(",.", "  "))
    assert await pool.fetchval("SELECT stello_search_text($1)", LETTERS) == BASES


def test_each_letter_reads_as_its_base_letter() -> None:
    """A letter of the table is its canonical decomposition's first letter (the rest being
    combining marks), read as a stroked letter's base where it is one; no letter of the blocks
    that decomposes so is left out."""
    stroked = dict(zip(STROKED, STROKED_BASES, strict=True))
    table = dict(zip(LETTERS, BASES, strict=True))
    assert len(table) == len(LETTERS)
    for c in _blocks():
        parts = unicodedata.normalize("NFD", c)
        marks = len(parts) > 1 and all("\u0300" <= m <= "\u036f" for m in parts[1:])
        base = stroked.get(parts[0], parts[0]) if marks else stroked.get(c)
        if base is not None and base.isascii() and base.isalpha():
            assert table.get(c) == base, c
        else:
            assert c not in table, c


def test_two_letter_forms_stay() -> None:
    """ "ß", "æ", "œ" and "þ" are two letters' sounds: they stay themselves (neither "ss" nor
    "s": a longer form would move the highlight's offsets, a shorter one find other words);
    since 0045 their capitals read as the small letters (ASCII is the configuration's to
    lowercase)."""
    assert normalise("Straße Æsir œuvre Þing") == "Straße æsir œuvre þing"


def test_the_query_reads_accents_as_base_letters() -> None:
    """The query maps the letters as the database does, and removes the combining marks."""
    assert parse_query("Café naïve -Łódź").text == parse_query("Cafe naive -Lodz").text
    assert parse_query('"São Paulo"').text == parse_query('"Sao Paulo"').text
    assert parse_query("cafe\u0301*").text == parse_query("cafe*").text
    assert parse_query("\u0301\u0308").text == ""  # marks alone: no term


@pytest.mark.parametrize(
    ("content", "lexemes", "words"),
    [
        ("Le CAFÉ et le café", "'cafe'", ["CAFÉ", "café"]),
        ("İstanbul and ISTANBUL", "'istanbul'", ["İstanbul", "ISTANBUL"]),
        ("İİ then Łódź", "'lodz'", ["Łódź"]),  # `İ` before: offsets of the content itself
        ("ａ cafe\u0301\u0301s", "'cafe'", ["cafe\u0301\u0301s"]),
        ("Ærø naïve", "'naiv'", ["naïve"]),
    ],
)
def test_an_accented_word_is_marked_at_its_offset_in_the_original(
    content: str, lexemes: str, words: list[str]
) -> None:
    """The highlighter finds the accented word for the plain lexeme and marks it where it is
    in the original text, whatever precedes it."""
    text, start, spans = snippet(content, *terms(lexemes))
    assert (text, start) == (content, 0)
    assert [content[s:e] for s, e in spans] == words


async def test_letters_among_another_script_read_as_the_query_does(pool: asyncpg.Pool) -> None:
    """Migration 0044 maps only the runs of letters of a line (not the whole line): the letters
    between Cyrillic, CJK and ASCII, at a line's start and end, in runs and alone, read as
    `normalise` reads them, and the rest as it was."""
    line = "éпривет Łódź мир 中文ẞ文 a\u00e9\u0301b ÀÉÎ,ĳ Ø"
    text = "\n".join([line, "плайн", "", line * 3, "ŁÓDŹ"])
    database = await pool.fetchval("SELECT stello_search_text($1)", text)
    assert database == normalise(text).translate(str.maketrans(",", " "))
