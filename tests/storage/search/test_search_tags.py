"""Words inside `<...>` and words joined to zero-width or bidi marks are found (explore8 F4,
migration 0035): through SearchRecords and SearchSessions by the plain word, and by a query
pasted with the tag or the mark."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.search.query import normalise, parse_query
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "see <thinking>plan carefully</thinking> then answer",
    '<div class="foo">hello</div>',
    "the pass\u200bword is long",
    "\u202eolleh rever\u202ased",
    "a soft\u00adware note",
    "zero\ufeffwidth and join\u2060ed",
    "only the end of a block</reasoning>",
    "<tool_result><status>ok</status></tool_result>",
)


@pytest.fixture(name="tagged")
async def _tagged(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Tagged")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seq"),
        [
            pytest.param("thinking", 1, id="tag-name"),
            pytest.param("<thinking>", 1, id="tag-as-query"),
            pytest.param('"plan carefully"', 1, id="inside-a-tag"),
            pytest.param("div", 2, id="html-tag"),
            pytest.param("class foo", 2, id="attribute-words"),
            pytest.param("password", 3, id="zero-width-space"),
            pytest.param("olleh", 4, id="bidi-override-before"),
            pytest.param("reversed", 4, id="bidi-embedding-inside"),
            pytest.param("software", 5, id="soft-hyphen"),
            pytest.param("zerowidth joined", 6, id="bom-word-joiner"),
            pytest.param("reasoning", 7, id="closing-tag-alone"),
            pytest.param("tool_result status", 8, id="nested-tags"),
        ],
    )
    async def test_found_by_the_plain_word(
        self, stub: Stub, space: TestSpace, tagged: uuid.UUID, query: str, seq: int
    ) -> None:
        """A record is found by a word inside a tag or joined to a mark."""
        assert found(await search(stub, space, query)) == {(str(tagged), seq)}

    async def test_a_query_pasted_with_a_mark(
        self, stub: Stub, space: TestSpace, tagged: uuid.UUID, make_session: MakeSession
    ) -> None:
        """A query holding a zero-width mark finds the word with or without the mark."""
        plain = await make_session()
        await append(stub, space, plain, rec("my password expired"))
        assert found(await search(stub, space, "pass\u200bword")) == {
            (str(tagged), 3),
            (str(plain), 1),
        }
        assert found(await search(stub, space, '"\u202bpass\u200cword"')) == {
            (str(tagged), 3),
            (str(plain), 1),
        }

    async def test_the_match_covers_the_marked_word(
        self, stub: Stub, space: TestSpace, tagged: uuid.UUID
    ) -> None:
        """The highlight of a word with a mark inside spans the whole word."""
        hits = await search(stub, space, "password")
        assert marked(hits[0]) == ["pass\u200bword"]
        hits = await search(stub, space, "thinking")
        assert marked(hits[0]) == ["thinking", "thinking"]


async def labels(stub: Stub, space: TestSpace, query: str) -> list[str]:
    reply = await stub.SearchSessions(
        storage_pb2.SearchSessionsRequest(space_id=space.sid, query=query)
    )
    return [s.id for s in reply.sessions]


class TestLabels:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("Notes <draft>", "draft", id="tag"),
            pytest.param("pass\u200bword rotation", "password", id="zero-width"),
            pytest.param("re\u2066lease\u2069 plan", "release", id="bidi-isolate"),
        ],
    )
    async def test_a_label_is_found_by_the_plain_word(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions finds a label's word inside a tag or joined to a mark."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]


class TestQuery:
    @pytest.mark.parametrize(
        ("raw", "plain"),
        [
            pytest.param("<thinking>", "thinking", id="tag"),
            pytest.param("</div>", "div", id="closing-tag"),
            pytest.param("pass\u200bword", "password", id="zero-width"),
            pytest.param("\u202ehello\u202c", "hello", id="bidi"),
            pytest.param("soft\u00adware*", "software*", id="soft-hyphen-prefix"),
            pytest.param('"pass\u2060word reset"', '"password reset"', id="phrase"),
        ],
    )
    def test_normalised_as_the_content(self, raw: str, plain: str) -> None:
        """A query is parsed as its text without tags' brackets and marks."""
        assert parse_query(raw) == parse_query(plain)

    def test_normalise(self) -> None:
        """`<` and `>` become spaces and the marks go, as migration 0035's function does."""
        assert normalise("<a>x\u200by\u00ad\ufeff</a>") == " a xy /a "

    def test_marks_alone_find_nothing(self) -> None:
        """A query of marks only is no term: it finds nothing (not a syntax error)."""
        assert parse_query("\u200b\u202e").text == ""

    async def test_the_database_removes_the_same_marks(self, pool: asyncpg.Pool) -> None:
        """`stello_search_text` and `normalise` agree on every mark, and on the characters
        next to each range."""
        points = [0xAD, 0xAC, 0xAE, *range(0x200A, 0x2011), *range(0x2029, 0x2030)]
        points += [*range(0x205F, 0x206B), 0xFEFE, 0xFEFF, 0xFF00]
        text = "<x>" + "".join(f"a{chr(p)}b " for p in points)
        assert await pool.fetchval("SELECT stello_search_text($1)", text) == normalise(text)
