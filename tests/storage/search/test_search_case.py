"""Search ignores case in every script, whatever the database's locale (migration 0045):
"привет" finds "ПРИВЕТ", "αθηνα" finds "ΑΘΗΝΑ", "οδος" finds "ΟΔΟΣ" (the final sigma), in
records, labels and metadata values, and a hit is marked on the capitals themselves.

The text-search configurations lowercase by the database's LC_CTYPE: under the C locale (the
Citus test cluster, tests/support/citus.py) no letter beyond ASCII, so "ПРИВЕТ" was the word
'ПРИВЕТ', found by no lowercase query; under C.UTF-8 "ΟΔΟΣ" was 'οδοσ', which the typed
"οδος" (its last letter the final sigma) is not."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.search.highlight import snippet, terms
from storage_service.search.letters import CASED_END, LOWER
from storage_service.search.query import normalise, parse_query
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search, session_ids, tag
from tests.storage.search.test_search_tags import labels
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "ПРИВЕТ МИР",  # 1
    "привет, мир",  # 2
    "ΑΘΗΝΑ ΚΑΙ ΟΔΟΣ",  # 3
    "αθηνα και οδος",  # 4: the final sigma
    "ÆSIR ÞING ŊAI",  # 5: Latin capitals with no base letter
    "İSTANBUL ÇA VA",  # 6
    "ԱՐԱՐԱՏ ႠႡႢ",  # 7: Armenian, Georgian capitals
)


@pytest.fixture(name="cased")
async def _cased(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Cases")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            pytest.param("привет", {1, 2}, id="cyrillic-lower-finds-upper"),
            pytest.param("ПРИВЕТ", {1, 2}, id="cyrillic-upper-finds-lower"),
            pytest.param("Мир", {1, 2}, id="cyrillic-capitalised"),
            pytest.param("αθηνα", {3, 4}, id="greek"),
            pytest.param("οδος", {3, 4}, id="final-sigma"),
            pytest.param("ΟΔΟΣ", {3, 4}, id="capital-sigma"),
            pytest.param("οδοσ", {3, 4}, id="sigma"),
            pytest.param("æsir þing", {5}, id="latin-letters-with-no-base"),
            pytest.param("ŋai", {5}, id="eng"),
            pytest.param("istanbul", {6}, id="dotted-capital-i"),
            pytest.param("ça", {6}, id="cedilla"),
            pytest.param("արարատ", {7}, id="armenian"),
            pytest.param("ⴀⴁⴂ", {7}, id="georgian"),
            pytest.param("при*", {1, 2}, id="prefix"),
        ],
    )
    async def test_found_in_either_case(
        self, stub: Stub, space: TestSpace, cased: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """A word is found by its capitals and by its small letters, in every script."""
        assert found(await search(stub, space, query)) == {(str(cased), s) for s in seqs}

    @pytest.mark.parametrize(
        ("query", "seq", "words"),
        [
            pytest.param("привет", 1, ["ПРИВЕТ"], id="cyrillic"),
            pytest.param("οδος αθηνα", 3, ["ΑΘΗΝΑ", "ΟΔΟΣ"], id="greek"),
            pytest.param("ΟΔΟΣ", 4, ["οδος"], id="final-sigma"),
        ],
    )
    async def test_the_capitals_are_marked(
        self,
        stub: Stub,
        space: TestSpace,
        cased: uuid.UUID,
        query: str,
        seq: int,
        words: list[str],
    ) -> None:
        """The highlight marks the words in their own case, at their offsets."""
        hits = {hit.seq: hit for hit in await search(stub, space, query)}
        assert marked(hits[seq]) == words


class TestLabelsAndValues:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("ПЛАН ЗАПУСКА", "план", id="cyrillic-label"),
            pytest.param("план запуска", "ПЛАН", id="cyrillic-query"),
            pytest.param("ΟΔΟΣ ΑΘΗΝΑΣ", "οδος", id="final-sigma"),
        ],
    )
    async def test_a_label_is_found_in_either_case(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions reads a label's capitals as small letters, as the query's."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]

    async def test_a_metadata_value_is_found_in_either_case(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A metadata value's capitals read as small letters (its vector reads the labels'
        normalisation)."""
        upper, lower = await make_session(), await make_session()
        await tag(pool, space.id, upper, city="МОСКВА")
        await tag(pool, space.id, lower, city="москва-сити")
        assert set(await session_ids(stub, space, "Москва")) == {str(upper), str(lower)}
        assert await session_ids(stub, space, "СИТИ") == [str(lower)]


def _cased_characters() -> str:
    """Every character below CASED_END whose lowercase is another character, and the final
    sigma."""
    return "".join(chr(p) for p in range(0x80, CASED_END) if chr(p).lower() != chr(p)) + "ς"


async def test_the_database_lowercases_as_the_query_does(pool: asyncpg.Pool) -> None:
    """`stello_search_text` and `normalise` read every cased character alike (one table,
    letters.py `LOWER`, for the migration's `translate` and the query's), alone, inside words
    and between other scripts' words, whatever the database's locale."""
    chars = _cased_characters()
    text = "".join(f"a{c}b " for c in chars) + chars + "\nПривет мир and ΟΔΟΣ\n\n中文 Ǆ\n"
    database = await pool.fetchval("SELECT stello_search_text($1)", text)
    assert database == normalise(text)
    assert not [c for c in database if not c.isascii() and c.lower() != c]  # none left


def test_the_table_is_one_character_for_one() -> None:
    """Every character whose lowercase is one other character is in the table (or read as a
    base letter or an ASCII form first), past CASED_END none has a lowercase, and a letter
    whose lowercase is longer ("İ": "i" and a dot above) reads as its base letter: a hit's
    offsets stay the content's."""
    assert all(len(chr(v)) == 1 for v in LOWER.values())
    assert not [p for p in range(CASED_END, 0x110000) if chr(p) != chr(p).lower()]
    assert normalise("İΣΑΣ Ǆ Ꭰ \u212a \u212b") == "Iσασ ǆ ꭰ k a"  # the Kelvin, Ångström signs
    for c in _cased_characters():
        assert len(normalise(c)) == 1, c


def test_the_query_reads_capitals_as_small_letters() -> None:
    """The query lowercases every script as the database does: "ПРИВЕТ" is "привет", the
    final sigma is a sigma."""
    assert parse_query("ПРИВЕТ ΟΔΟΣ").text == parse_query("привет οδος").text
    assert parse_query('"Мир Труд"').text == parse_query('"мир труд"').text


@pytest.mark.parametrize(
    ("content", "lexemes", "words"),
    [
        ("ПРИВЕТ и Привет и привет", "'привет'", ["ПРИВЕТ", "Привет", "привет"]),
        ("ΟΔΟΣ, Οδος, οδος", "'οδοσ'", ["ΟΔΟΣ", "Οδος", "οδος"]),
        ("İİ then ΑΘΗΝΑ", "'αθηνα'", ["ΑΘΗΝΑ"]),
    ],
)
def test_a_word_is_marked_in_its_own_case(content: str, lexemes: str, words: list[str]) -> None:
    """The highlighter marks a word of any case for the small letters' lexeme, where it is."""
    text, start, spans = snippet(content, *terms(lexemes))
    assert (text, start) == (content, 0)
    assert [content[s:e] for s, e in spans] == words
