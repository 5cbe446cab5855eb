"""Search leaves out the Arabic tatweel (U+0640, the kashida that stretches a word) and the
Quranic annotation marks (U+0610-U+061A, U+06D6-U+06ED) as it leaves out the harakat
(migration 0049): "كتب" finds "كـتـب" and the reverse, "فيه" finds "فِيهِۦ", "محمد" finds
"محمدؐ", in records, labels and metadata values, and a hit is marked on the word as it is
written."""

from __future__ import annotations

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

TATWEEL = "\u0640"
# The Quranic annotation marks: the honorific signs and small letters above (U+0610-U+061A),
# the pause marks, small high and low letters, the end of ayah, the rub el hizb and the
# place of sajdah signs and the stops (U+06D6-U+06ED).
QURANIC = "".join(chr(p) for p in (*range(0x610, 0x61B), *range(0x6D6, 0x6EE)))

CONTENTS = (
    "كـتـب الولد الدرس",  # 1: tatweel inside the word
    "كتب الولد",  # 2: plain
    "فِيهِۦ هُدًۭى لِّلْمُتَّقِينَ",  # 3: small waw (U+06E5), small low meem (U+06ED)
    "محمدؐ رسول",  # 4: the sallallahou sign (U+0610)
    "ذَٰلِكَ ٱلْكِتَٰبُ لَا رَيْبَ ۛ فِيهِ ۛ",  # 5: the small high three dots (U+06DB) alone
    "الحمد لله ۝١",  # 6: the end of ayah (U+06DD) before the verse's number
)


@pytest.fixture(name="written")
async def _written(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Quran")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seqs"),
        [
            pytest.param("كتب", {1, 2}, id="plain-finds-tatweel"),
            pytest.param("كـتـب", {1, 2}, id="tatweel-finds-plain"),
            pytest.param("كـتـــب", {1, 2}, id="longer-kashida"),
            pytest.param("فيه", {3, 5}, id="small-waw"),
            pytest.param("هدى", {3}, id="small-low-meem"),
            pytest.param("محمد", {4}, id="honorific-sign"),
            pytest.param("لا ريب", {5}, id="pause-mark-alone"),
            pytest.param("لله", {6}, id="end-of-ayah"),
            pytest.param("كـت*", {1, 2}, id="prefix"),
        ],
    )
    async def test_found_with_or_without_tatweel_and_marks(
        self, stub: Stub, space: TestSpace, written: uuid.UUID, query: str, seqs: set[int]
    ) -> None:
        """A word is found whether the record or the query stretches it with the tatweel or
        carries Quranic marks, or not."""
        assert found(await search(stub, space, query)) == {(str(written), s) for s in seqs}

    @pytest.mark.parametrize(
        ("query", "seq", "words"),
        [
            pytest.param("كتب", 1, ["كـتـب"], id="tatweel"),
            pytest.param("فيه", 3, ["فِيهِۦ"], id="small-waw"),
            pytest.param("محمد", 4, ["محمدؐ"], id="honorific-sign"),
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
        """The highlight marks the word as the record writes it, tatweel and marks included."""
        hits = {hit.seq: hit for hit in await search(stub, space, query)}
        assert marked(hits[seq]) == words


class TestLabelsAndValues:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("مـكـتـبـة المدينة", "مكتبة", id="tatweel-label"),
            pytest.param("مكتبة المدينة", "مـكـتـبـة", id="tatweel-query"),
            pytest.param("سورة ٱلْفَاتِحَةِ فِيهِۦ", "فيه", id="quranic-label"),
        ],
    )
    async def test_a_label_is_found_without_tatweel_and_marks(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions reads a label's tatweel and Quranic marks as the query's."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]

    async def test_a_metadata_value_is_found_without_tatweel_and_marks(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A metadata value's tatweel and Quranic marks read as the query's."""
        stretched, marked_ = await make_session(), await make_session()
        await tag(pool, space.id, stretched, city="القـاهـرة")
        await tag(pool, space.id, marked_, verse="عَلَيْهِۦ")
        assert await session_ids(stub, space, "القاهرة") == [str(stretched)]
        assert await session_ids(stub, space, "عليه") == [str(marked_)]


async def test_the_database_reads_tatweel_and_marks_as_the_query_does(pool: asyncpg.Pool) -> None:
    """`stello_search_text` and `normalise` leave out the tatweel and every Quranic mark
    alike: alone, inside words and between other scripts' words."""
    chars = TATWEEL + QURANIC
    text = "".join(f"ب{c}ש {c}x " for c in chars) + chars + "\nكـتـب فِيهِۦ ok\n"
    database = await pool.fetchval("SELECT stello_search_text($1)", text)
    assert database == normalise(text)
    assert not set(database) & set(chars)  # none left


def test_the_query_leaves_tatweel_and_marks_out() -> None:
    """The query leaves out the tatweel and the Quranic marks, as the database does."""
    assert normalise("كـتـب فِيهِۦ") == "كتب فيه"
    assert parse_query("كـتـب").text == parse_query("كتب").text
    assert parse_query("محمدؐ").text == parse_query("محمد").text
    assert normalise(TATWEEL + QURANIC) == ""


@pytest.mark.parametrize(
    ("content", "lexemes", "words"),
    [
        ("كـتـب و كتب و كتبـ", "'كتب'", ["كـتـب", "كتب", "كتبـ"]),
        ("ـكتب", "'كتب'", ["ـكتب"]),
        ("فِيهِۦ فيه", "'فيه'", ["فِيهِۦ", "فيه"]),
        ("محمدؐ", "'محمد'", ["محمدؐ"]),
    ],
)
def test_a_word_is_marked_as_written(content: str, lexemes: str, words: list[str]) -> None:
    """The highlighter marks the written word, tatweel and marks included, for the plain
    lexeme."""
    text, start, spans = snippet(content, *terms(lexemes))
    assert (text, start) == (content, 0)
    assert [content[s:e] for s, e in spans] == words
