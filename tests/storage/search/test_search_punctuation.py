"""ASCII punctuation separates words in what is searched, as it does in a query (migration
0038): a ticket id, a domain, an e-mail address, a version or a file name in a record or a
label is found by the words it is made of, and by itself pasted as the query. The text-search
parser read "JIRA-4411" as 'jira' and the number '-4411', "example.com" as one host name,
"v2.0" as one version, while the query splits them into words: none was found."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import found, marked, search
from tests.storage.search.test_search_tags import labels
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

CONTENTS = (
    "login fails since JIRA-4411 was merged",
    "see https://example.com/docs/page.html for the steps",
    "write to ops.team@corp.io today",
    "upgrade to v2.0 then pin 3.14",
    "the bug is in src/search/query.py near node.js glue",
)


@pytest.fixture(name="punctuated")
async def _punctuated(stub: Stub, space: TestSpace, make_session: MakeSession) -> uuid.UUID:
    sid = await make_session(label="Punctuated")
    await append(stub, space, sid, *(rec(content) for content in CONTENTS))
    return sid


class TestRecords:
    @pytest.mark.parametrize(
        ("query", "seq"),
        [
            pytest.param("4411", 1, id="ticket-number"),
            pytest.param("JIRA-4411", 1, id="ticket-id"),
            pytest.param("example", 2, id="domain-word"),
            pytest.param("example.com", 2, id="domain"),
            pytest.param("docs page", 2, id="url-path-words"),
            pytest.param("https://example.com/docs/page.html", 2, id="url"),
            pytest.param("corp", 3, id="e-mail-domain"),
            pytest.param("ops.team@corp.io", 3, id="e-mail"),
            pytest.param("v2.0", 4, id="version"),
            pytest.param("3.14", 4, id="decimal"),
            pytest.param("query.py", 5, id="file-name"),
            pytest.param("src/search", 5, id="path"),
            pytest.param("node", 5, id="dotted-name-word"),
        ],
    )
    async def test_found_by_its_words_and_as_pasted(
        self, stub: Stub, space: TestSpace, punctuated: uuid.UUID, query: str, seq: int
    ) -> None:
        """A record is found by a word joined to others by ASCII punctuation, and by the
        whole punctuated text as the query."""
        assert found(await search(stub, space, query)) == {(str(punctuated), seq)}

    async def test_the_words_are_marked(
        self, stub: Stub, space: TestSpace, punctuated: uuid.UUID
    ) -> None:
        """The highlight marks the words the punctuated query is made of."""
        hits = await search(stub, space, "JIRA-4411")
        assert marked(hits[0]) == ["JIRA", "4411"]


class TestLabels:
    @pytest.mark.parametrize(
        ("label", "query"),
        [
            pytest.param("JIRA-4411 login fix", "4411", id="ticket-number"),
            pytest.param("JIRA-4411 login fix", "JIRA-4411", id="ticket-id"),
            pytest.param("example.com outage", "example.com", id="domain"),
            pytest.param("example.com outage", "com", id="domain-word"),
            pytest.param("release v2.0", "v2.0", id="version"),
        ],
    )
    async def test_a_label_is_found_by_its_words(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, label: str, query: str
    ) -> None:
        """SearchSessions finds a label's word joined to others by ASCII punctuation, as it
        finds a metadata value's (migration 0021)."""
        sid = await make_session(label=label)
        assert await labels(stub, space, query) == [str(sid)]


async def test_the_database_splits_at_what_the_query_splits_at(pool: asyncpg.Pool) -> None:
    """`stello_search_text` makes each ASCII punctuation character a space (the query's
    words, `_PIECE`, split at each of them but `_`, which the parser splits at) and keeps
    letters, digits and spaces; it still removes the marks."""
    text = "".join(f"a{chr(p)}b " for p in range(0x20, 0x7F)) + "x\u200by"
    plain = "".join(f"a{c if c.isalnum() else ' '}b " for c in map(chr, range(0x20, 0x7F)))
    assert await pool.fetchval("SELECT stello_search_text($1)", text) == plain + "xy"


@pytest.mark.parametrize(
    ("query", "words"),
    [
        pytest.param("e-mail", ["e", "mail"], id="one-letter"),
        pytest.param("3.14", ["3", "14"], id="numbers"),
        pytest.param("C++", ["C"], id="one-letter-alone"),
        pytest.param("e*", ["every", "e", "echo"], id="a-prefix-still-marks-words"),
    ],
)
async def test_a_letter_or_a_number_marks_itself_only(
    stub: Stub, space: TestSpace, make_session: MakeSession, query: str, words: list[str]
) -> None:
    """A one-letter or numeric word of the query ("e" of "e-mail", "3" of "3.14") marks
    that word alone, not every word that starts with it ("every", "30")."""
    sid = await make_session()
    await append(stub, space, sid, rec("every e-mail since 3.14 costs 30 or 140 C coins: echo"))
    hits = await search(stub, space, query)
    assert found(hits) == {(str(sid), 1)}
    assert marked(hits[0]) == words


@pytest.mark.parametrize(
    ("query", "words"),
    [
        pytest.param("retries", ["RETRIES"], id="after-an-underscore"),
        pytest.param("max", ["MAX"], id="before-an-underscore"),
        pytest.param("max_retries", ["MAX", "RETRIES"], id="both"),
    ],
)
async def test_a_word_joined_by_an_underscore_is_in_the_snippet_and_marked(
    stub: Stub, space: TestSpace, make_session: MakeSession, query: str, words: list[str]
) -> None:
    """The records read `_` as a space (migration 0038), so "retries" finds "MAX_RETRIES";
    the snippet is cut around that word and marks it, as it does "example" in
    "example.com". The highlighter read "MAX_RETRIES" as one word that does not start with
    "retries": no mark, and the snippet was the record's start, without the match."""
    sid = await make_session()
    await append(stub, space, sid, rec("filler " * 100 + "hit MAX_RETRIES then gave up"))
    [hit] = await search(stub, space, query)
    assert hit.snippet_offset > 0
    assert marked(hit) == words
